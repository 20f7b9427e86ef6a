"""Registry framing against confluent-kafka's mock client and a real Apicurio Registry."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from io import BytesIO
from itertools import count
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from fastavro import schemaless_writer

from resultlog.schemas import (
    Codec,
    Location,
    RegistryError,
    RunSummary,
    SampleResult,
    SchemaCatalog,
    SchemaVersion,
    UnknownSchemaError,
    WireFormat,
    shipped_catalog,
)
from resultlog.schemas._catalog import RUN_SUMMARY, SAMPLE_RESULT, build_version
from resultlog.schemas._registry import Registry
from tests.support.apicurio import ApicurioRegistry
from tests.support.records import RecordFactory
from tests.support.schemas import fixture_v4

ClientFactory = Callable[[], SchemaRegistryClient]
_topics = count()


@pytest.fixture(
    params=[
        pytest.param("mock", marks=pytest.mark.mock_registry),
        # The slow tier: a real Apicurio Registry starts first (a JVM of its own).
        pytest.param("apicurio", marks=[pytest.mark.real_registry, pytest.mark.slow]),
    ]
)
def new_client(request: pytest.FixtureRequest) -> Iterator[ClientFactory]:
    """Clients of one registry: the mock is a single in-process instance, Apicurio is real."""
    if request.param == "mock":
        mock = SchemaRegistryClient.new_client({"url": "mock://resultlog-tests"})
        yield lambda: mock
        return
    registry: ApicurioRegistry = request.getfixturevalue("apicurio")
    with ExitStack() as clients:
        yield lambda: clients.enter_context(SchemaRegistryClient({"url": registry.url}))


@pytest.fixture
def topic() -> str:
    """A topic name no other test registered under."""
    return f"resultlog.sample-results.t{next(_topics)}"


def _framed(version_id: int, body: bytes) -> bytes:
    """A Confluent-framed value."""
    return b"\x00" + version_id.to_bytes(4, "big") + body


def test_encode_registers_under_the_topic_subject_and_frames_with_the_id(
    new_client: ClientFactory, topic: str, make_record: RecordFactory
) -> None:
    writer = Codec(registry_client=new_client())
    raw = writer.encode_sample_result(make_record(), topic)
    latest = new_client().get_latest_version(f"{topic}-value")
    assert raw[0] == 0 and int.from_bytes(raw[1:5], "big") == latest.schema_id
    assert writer.wire_format is WireFormat.REGISTRY
    reader = Codec(registry_client=new_client())
    assert reader.decode_sample_result(raw, at=Location(topic)) == make_record()


def test_schema_ids_are_cached_per_topic(
    new_client: ClientFactory,
    topic: str,
    make_record: RecordFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = new_client()
    calls: list[str] = []
    register = client.register_schema

    def counting(subject: str, schema: Schema, normalize_schemas: bool = False) -> int:
        calls.append(subject)
        return register(subject, schema, normalize_schemas)

    monkeypatch.setattr(client, "register_schema", counting)
    codec = Codec(registry_client=client)
    first = codec.encode_sample_result(make_record(), topic)
    second = codec.encode_sample_result(make_record(epoch=0), topic)
    assert first[:5] == second[:5] and calls == [f"{topic}-value"]


def test_summaries_use_their_own_subject(
    new_client: ClientFactory, topic: str, summary: RunSummary
) -> None:
    codec = Codec(registry_client=new_client())
    raw = codec.encode_run_summary(summary, topic)
    latest = new_client().get_latest_version(f"{topic}-value")
    assert int.from_bytes(raw[1:5], "big") == latest.schema_id
    registered = json.loads(latest.schema.schema_str or "null")
    assert registered == shipped_catalog().current(RUN_SUMMARY).definition
    assert Codec(registry_client=new_client()).decode_run_summary(raw) == summary


def test_a_registry_codec_still_reads_single_object_values(
    new_client: ClientFactory, make_record: RecordFactory
) -> None:
    raw = Codec().encode_sample_result(make_record())
    assert Codec(registry_client=new_client()).decode_sample_result(raw) == make_record()


def test_unknown_schema_id_is_an_unknown_schema_error(
    new_client: ClientFactory, make_record: RecordFactory
) -> None:
    body = Codec().encode_sample_result(make_record())[10:]
    raw = _framed(987_654, body)
    with pytest.raises(UnknownSchemaError) as info:
        Codec(registry_client=new_client()).decode_sample_result(raw, at=Location("t", None, 5))
    assert "schema id 987654 is not in the registry" in info.value.reason
    assert info.value.raw == raw and info.value.offset == 5


def test_an_id_of_another_record_type_is_refused(
    new_client: ClientFactory, topic: str, summary: RunSummary
) -> None:
    raw = Codec(registry_client=new_client()).encode_run_summary(summary, topic)
    with pytest.raises(UnknownSchemaError, match=r"is a resultlog\.RunSummary schema"):
        Codec(registry_client=new_client()).decode_sample_result(raw)


def test_old_reader_reads_a_newer_writer_through_the_registry(
    new_client: ClientFactory, topic: str, make_record: RecordFactory
) -> None:
    Codec(registry_client=new_client()).encode_sample_result(make_record(), topic)
    v3 = fixture_v4()
    schema_id = new_client().register_schema(f"{topic}-value", Schema(v3.text, "AVRO"))
    datum = make_record().model_dump() | {"seed": 3, "tags": ["x"]}
    datum["score"] = datum["score"] | {"confidence": 0.5}
    buf = BytesIO()
    schemaless_writer(buf, v3.parsed, datum)
    decoded = Codec(registry_client=new_client()).decode_sample_result(
        _framed(schema_id, buf.getvalue())
    )
    assert decoded == make_record()


def test_v2_registers_as_a_compatible_new_version_of_a_v1_subject(
    new_client: ClientFactory, topic: str, make_record: RecordFactory
) -> None:
    client = new_client()
    subject = f"{topic}-value"
    v1 = shipped_catalog().get(SAMPLE_RESULT, 1)
    v1_id = Registry(client).schema_id(topic, v1)  # what a v1 writer registered, FULL_TRANSITIVE
    datum = {k: v for k, v in make_record().model_dump().items() if k in _names(v1)}
    datum["score"].pop("numeric")
    for message in datum["messages"]:
        message.pop("reasoning_details")
        message.pop("citations")
    buf = BytesIO()
    schemaless_writer(buf, v1.parsed, datum)
    codec = Codec(registry_client=client)
    raw_v2 = codec.encode_sample_result(make_record(), topic)
    v2_id = int.from_bytes(raw_v2[1:5], "big")
    assert v2_id != v1_id
    assert len(client.get_versions(subject)) == 2
    assert codec.decode_sample_result(_framed(v1_id, buf.getvalue())) == make_record()
    assert codec.decode_sample_result(raw_v2) == make_record()


def _names(version: SchemaVersion) -> set[str]:
    """Top-level field names of a schema version."""
    return {f["name"] for f in version.definition["fields"]}


@pytest.mark.mock_registry
def test_an_unresolvable_registry_writer_is_an_unknown_schema_error(
    make_record: RecordFactory,
) -> None:
    client = SchemaRegistryClient.new_client({"url": "mock://unresolvable"})
    definition = dict(shipped_catalog().current(SAMPLE_RESULT).definition)
    definition["fields"] = [{"name": "only", "type": "long"}]
    alien = build_version(definition, 0)
    schema_id = client.register_schema("other-value", Schema(alien.text, "AVRO"))
    buf = BytesIO()
    schemaless_writer(buf, alien.parsed, {"only": 5})
    with pytest.raises(UnknownSchemaError, match="from the registry") as info:
        Codec(registry_client=client).decode_sample_result(_framed(schema_id, buf.getvalue()))
    assert "cannot be read as resultlog.SampleResult v3" in info.value.reason


def test_a_bad_registry_config_is_a_registry_error() -> None:
    with pytest.raises(RegistryError, match="cannot configure") as info:
        Codec(registry_url="http://127.0.0.1:1", registry_config={"bogus.key": 1})
    assert isinstance(info.value.__cause__, ValueError)


@pytest.fixture
def registered(
    apicurio: ApicurioRegistry,
    topic: str,
    make_record: RecordFactory,
    request: pytest.FixtureRequest,
) -> SchemaRegistryClient:
    """A client of the real registry whose topic subject holds the shipped SampleResult."""
    client = SchemaRegistryClient({"url": apicurio.url})
    request.addfinalizer(client.close)
    Codec(registry_client=client).encode_sample_result(make_record(), topic)
    return client


def _with_a_required_new_field(version: SchemaVersion) -> dict[str, Any]:
    """The version's definition plus a field without a default: incompatible both ways."""
    definition = dict(version.definition)
    definition["fields"] = [*definition["fields"], {"name": "required_new", "type": "long"}]
    return definition


@pytest.mark.real_registry
@pytest.mark.slow  # a real Apicurio Registry starts first
def test_subject_is_full_transitive_and_the_registry_enforces_it(
    registered: SchemaRegistryClient, topic: str
) -> None:
    assert registered.get_compatibility(f"{topic}-value") == "FULL_TRANSITIVE"
    definition = _with_a_required_new_field(shipped_catalog().current(SAMPLE_RESULT))
    with pytest.raises(SchemaRegistryError) as info:
        registered.register_schema(
            f"{topic}-value", Schema(build_version(definition, 2).text, "AVRO")
        )
    assert info.value.http_status_code == 409


@pytest.mark.real_registry
@pytest.mark.slow  # a real Apicurio Registry starts first
def test_a_refused_registration_is_a_registry_error(
    registered: SchemaRegistryClient, topic: str, make_record: RecordFactory
) -> None:
    current = shipped_catalog().current(SAMPLE_RESULT)
    definition = _with_a_required_new_field(current)
    # The version the codec writes, redefined so that the registry must refuse it.
    incompatible = SchemaCatalog([build_version(definition, current.version)]).with_versions(
        [v for v in shipped_catalog().all() if v.name != SAMPLE_RESULT]
    )
    codec = Codec(registry_client=registered, catalog=incompatible)
    with pytest.raises(RegistryError, match=r"registry refused resultlog\.SampleResult") as info:
        codec.encode_sample_result(make_record(), topic)
    assert isinstance(info.value.__cause__, SchemaRegistryError)


@pytest.fixture
def dead_registry_url() -> Iterator[str]:
    """A loopback URL whose OS-chosen port was just released, so connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    yield f"http://127.0.0.1:{port}"


def test_an_unreachable_registry_is_a_registry_error_not_a_decode_error(
    dead_registry_url: str, make_record: RecordFactory, request: pytest.FixtureRequest
) -> None:
    codec = Codec(registry_url=dead_registry_url, registry_config={"max.retries": 0})
    request.addfinalizer(codec.close)
    with pytest.raises(RegistryError, match="unavailable") as info:
        codec.encode_sample_result(make_record(), "resultlog.sample-results")
    assert "Connection refused" in str(info.value.__cause__)  # the transport's own error
    body = Codec().encode_sample_result(make_record())[10:]
    with pytest.raises(RegistryError, match="schema id 1") as decode_info:
        codec.decode_sample_result(_framed(1, body))
    assert not isinstance(decode_info.value, UnknownSchemaError)


@pytest.mark.mock_registry
def test_registry_url_builds_a_client(make_record: RecordFactory) -> None:
    with Codec(registry_url="mock://from-url") as codec:
        raw = codec.encode_sample_result(make_record(), "resultlog.sample-results")
        assert raw[0] == 0 and codec.decode_sample_result(raw) == make_record()
        assert isinstance(codec.decode_sample_result(raw), SampleResult)


def test_close_closes_only_a_client_the_codec_created(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[str] = []
    callers = SchemaRegistryClient.new_client({"url": "mock://owned-by-caller"})
    monkeypatch.setattr(callers, "close", lambda: closed.append("caller's"))
    Codec(registry_client=callers).close()
    assert closed == []
    owned = SchemaRegistryClient.new_client({"url": "mock://owned-by-codec"})
    monkeypatch.setattr(owned, "close", lambda: closed.append("codec's"))
    monkeypatch.setattr(SchemaRegistryClient, "new_client", staticmethod(lambda conf: owned))
    with Codec(registry_url="mock://owned-by-codec"):
        assert closed == []
    assert closed == ["codec's"]
