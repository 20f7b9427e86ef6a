"""Schema evolution: released versions are frozen and every version reads every other."""

from __future__ import annotations

import hashlib
import json
import types
from io import BytesIO
from itertools import product
from pathlib import Path
from typing import Any, Union, get_args, get_origin

import pytest
from fastavro import schemaless_reader, schemaless_writer
from fastavro.utils import generate_many
from pydantic import BaseModel

from resultlog import schemas
from resultlog.schemas import (
    Codec,
    Harness,
    SampleResult,
    SchemaCatalog,
    SchemaVersion,
    shipped_catalog,
)
from resultlog.schemas._catalog import (
    AGGREGATOR_CHECKPOINT,
    CHUNK_TASK,
    MODEL_VERSIONS,
    RUN_INDEX,
    RUN_SUMMARY,
    SAMPLE_RESULT,
    load_file,
)
from tests.support.records import RecordFactory
from tests.support.schemas import fixture_v4

# Released schemas never change. A failure here means a released .avsc was edited: revert it
# and add a new version file instead. Only add lines; never edit one.
RELEASED = {
    (SAMPLE_RESULT, 1): (
        "12d72d671e92b058",
        "93e0d04af1712fca3e08c928b0424e544721b8a59b2c692ace788c6759881763",
    ),
    (RUN_SUMMARY, 1): (
        "073c4d634939b3ee",
        "aaafbacd4a3c34dbd88848163bdf1865594a5d08c6942274256f2e90d6caf478",
    ),
    (SAMPLE_RESULT, 2): (
        "ad060bf696bba1aa",
        "00857d153411e8e26f1070f7294dbf49297767a792e35a4b5a964b8b8e81b5bc",
    ),
    (RUN_SUMMARY, 2): (
        "70a6088aeb977dbf",
        "673e0c1dbd223268fb88b03fbb54e9849e15383e97ab4ee1d1f27c25ef143d8c",
    ),
    (CHUNK_TASK, 1): (
        "0013949bfe8322be",
        "21599d3317287374761fbd76c56470a3916eccb457eba41212012fce62a62a65",
    ),
    (CHUNK_TASK, 2): (
        "71d6a08e93b062b0",
        "bc98e33883db3cbf96e6ab21dc085cfddfdaac823d71c82df9dd72dd538d5a99",
    ),
    (AGGREGATOR_CHECKPOINT, 1): (
        "fd96d581b292536b",
        "8d61b6fee0882146592bba1f0ddf7a7f44f98e0af9ce6fcdb3d93e0ac280b21c",
    ),
    (RUN_INDEX, 1): (
        "809fb30f05f903fd",
        "26b280c1ff1e51b173efcdef0d9d18ef09910bd32289c14cc1f3e35c01b82f89",
    ),
    (AGGREGATOR_CHECKPOINT, 2): (
        "dc43a2e0f96d301f",
        "ee1161db86dbf8914ab3860df96aa35fb9f9aa05f985b5fa3f468474df3406c0",
    ),
    (SAMPLE_RESULT, 3): (
        "9a93c881efabeb9a",
        "9c47113160d2c1f02ea107b0f0328d2026dbff99cb130d73c4177bb372108df0",
    ),
    (AGGREGATOR_CHECKPOINT, 3): (
        "953b18ab36268f2c",
        "345645b0319de794c80d153213e96de2dd0f85151846046b0e5fc03f60975536",
    ),
    (RUN_INDEX, 2): (
        "df922b9fd5b6dcb1",
        "0a2b0edb68707ea532c9e4e4871d11c72d59f13a938a3f5be5a0cc6294ae73af",
    ),
}


def _content_hash(version: SchemaVersion) -> str:
    """sha256 of the full definition (defaults and docs included), whitespace-insensitive."""
    text = json.dumps(version.definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def evolution_catalog() -> SchemaCatalog:
    """The shipped versions plus the v4 fixture."""
    return shipped_catalog().with_versions([fixture_v4()])


def _pairs(catalog: SchemaCatalog) -> list[tuple[SchemaVersion, SchemaVersion]]:
    """Every (writer, reader) pair of versions of one record name, both directions."""
    names = {v.name for v in catalog.all()}
    return [(w, r) for n in sorted(names) for w, r in product(catalog.versions(n), repeat=2)]


def _write(version: SchemaVersion, datum: Any) -> bytes:
    """An Avro body written with one version."""
    buf = BytesIO()
    schemaless_writer(buf, version.parsed, datum)
    return buf.getvalue()


def _read(writer: SchemaVersion, reader: SchemaVersion, body: bytes) -> Any:
    """Read a body through fastavro schema resolution."""
    return schemaless_reader(BytesIO(body), writer.parsed, reader.parsed)


def test_every_shipped_version_is_pinned() -> None:
    shipped = {(v.name, v.version) for v in shipped_catalog().all()}
    assert shipped == set(RELEASED), "pin the fingerprint and hash of every released version"


@pytest.mark.parametrize(("name", "version"), sorted(RELEASED))
def test_released_versions_never_change(name: str, version: int) -> None:
    schema = shipped_catalog().get(name, version)
    fingerprint, content = RELEASED[name, version]
    assert schema.fingerprint.hex() == fingerprint
    assert _content_hash(schema) == content


def test_shipped_files_are_named_and_numbered_consistently() -> None:
    directory = Path(schemas.__file__).parent / "avro"
    stems: dict[str, list[int]] = {}
    for path in directory.glob("*.avsc"):
        version = load_file(path)
        stem = path.name.split(".")[0]
        assert version.name == "resultlog." + stem.title().replace("_", "")
        stems.setdefault(stem, []).append(version.version)
    assert sorted(stems) == [
        "aggregator_checkpoint",
        "chunk_task",
        "run_index",
        "run_summary",
        "sample_result",
    ]
    for versions in stems.values():
        assert sorted(versions) == list(range(1, len(versions) + 1))


def test_models_mirror_the_newest_shipped_versions() -> None:
    assert {n: shipped_catalog().current(n).version for n in MODEL_VERSIONS} == MODEL_VERSIONS


@pytest.mark.parametrize(
    ("writer", "reader"), _pairs(evolution_catalog()), ids=lambda v: f"{v.name}.v{v.version}"
)
def test_every_version_reads_every_other(writer: SchemaVersion, reader: SchemaVersion) -> None:
    writer_types = {f["name"]: f["type"] for f in writer.definition["fields"]}
    reader_types = {f["name"]: f["type"] for f in reader.definition["fields"]}
    # Fields typed alike in both must come through unchanged (timestamps come back tz-aware).
    kept = [
        name
        for name, avro_type in reader_types.items()
        if writer_types.get(name) == avro_type and "logicalType" not in json.dumps(avro_type)
    ]
    for datum in generate_many(writer.parsed, 25):
        decoded = _read(writer, reader, _write(writer, datum))
        assert set(decoded) == set(reader_types)
        assert {k: decoded[k] for k in kept} == {k: datum[k] for k in kept}


def _v2_only(record: SampleResult) -> SampleResult:
    """The record with every field v2 added set, as a v2 writer fills them."""
    score = record.score.model_copy(update={"numeric": 0.75})
    message = record.messages[0].model_copy(
        update={"reasoning_details": '[{"type": "reasoning.text"}]', "citations": "[]"}
    )
    return record.model_copy(
        update={
            "score": score,
            "messages": (message, *record.messages[1:]),
            "attempts": 2,
            "spent_cost": 0.5,
            "config": '{"model": "m"}',
            "config_fingerprint": "f1",
            "harness": Harness(name="inspect_ai", version="0.3.285"),
            "harness_payload": b"\x28\xb5\x2f\xfd",
            "truncated": '{"input": {"length": 10, "sha256": "00"}}',
        }
    )


def test_v1_reader_reads_a_v2_record(make_record: RecordFactory) -> None:
    v1, v2 = shipped_catalog().get(SAMPLE_RESULT, 1), shipped_catalog().get(SAMPLE_RESULT, 2)
    record = _v2_only(make_record())
    decoded = _read(v2, v1, _write(v2, record.model_dump()))
    assert set(decoded) == {f["name"] for f in v1.definition["fields"]}
    assert "numeric" not in decoded["score"]
    assert SampleResult.model_validate(decoded) == make_record()


def test_v2_reader_reads_a_v1_record_with_defaults(make_record: RecordFactory) -> None:
    v1, v2 = shipped_catalog().get(SAMPLE_RESULT, 1), shipped_catalog().get(SAMPLE_RESULT, 2)
    v1_datum = {k: v for k, v in make_record().model_dump().items() if k in _field_names(v1)}
    v1_datum["score"].pop("numeric")
    for message in v1_datum["messages"]:
        message.pop("reasoning_details")
        message.pop("citations")
    decoded = _read(v1, v2, _write(v1, v1_datum))
    assert decoded["attempts"] is None and decoded["spent_cost"] is None
    assert decoded["config"] is None and decoded["harness_payload"] is None
    assert decoded["score"]["numeric"] is None
    assert SampleResult.model_validate(decoded) == make_record()


def test_codec_reads_v1_and_v2_single_object_records(make_record: RecordFactory) -> None:
    v1 = shipped_catalog().get(SAMPLE_RESULT, 1)
    record = _v2_only(make_record())
    codec = Codec()
    assert (
        codec.encode_sample_result(record)[2:10]
        == shipped_catalog().current(SAMPLE_RESULT).fingerprint
    )
    assert codec.decode_sample_result(codec.encode_sample_result(record)) == record
    old = _read(
        shipped_catalog().get(SAMPLE_RESULT, 2),
        v1,
        _write(shipped_catalog().get(SAMPLE_RESULT, 2), record.model_dump()),
    )
    raw_v1 = b"\xc3\x01" + v1.fingerprint + _write(v1, old)
    assert codec.decode_sample_result(raw_v1) == make_record()


def test_v3_reader_reads_a_future_v4_record(make_record: RecordFactory) -> None:
    v3, v4 = shipped_catalog().get(SAMPLE_RESULT, 3), fixture_v4()
    datum = make_record().model_dump() | {"seed": 7, "tags": ["hard"]}
    datum["score"] = datum["score"] | {"confidence": 0.9}
    decoded = _read(v4, v3, _write(v4, datum))
    assert "seed" not in decoded and "confidence" not in decoded["score"]
    assert SampleResult.model_validate(decoded) == make_record()


def test_future_v4_reader_reads_a_v3_record(make_record: RecordFactory) -> None:
    v3, v4 = shipped_catalog().get(SAMPLE_RESULT, 3), fixture_v4()
    decoded = _read(v3, v4, _write(v3, make_record(selected_samples=5).model_dump()))
    assert decoded["seed"] is None and decoded["tags"] == []
    assert decoded["score"]["confidence"] is None
    assert (decoded["sample_index"], decoded["selected_samples"]) == (7, 5)


def test_v3_reads_a_v2_record_as_the_whole_dataset(make_record: RecordFactory) -> None:
    v2, v3 = shipped_catalog().get(SAMPLE_RESULT, 2), shipped_catalog().get(SAMPLE_RESULT, 3)
    decoded = _read(v2, v3, _write(v2, make_record().model_dump()))
    assert decoded["selected_samples"] is None
    assert SampleResult.model_validate(decoded) == make_record()


def test_codec_reads_a_known_newer_writer_into_the_model(make_record: RecordFactory) -> None:
    v4 = fixture_v4()
    datum = make_record().model_dump() | {"seed": 1, "tags": []}
    datum["score"] = datum["score"] | {"confidence": None}
    raw = b"\xc3\x01" + v4.fingerprint + _write(v4, datum)
    assert Codec(catalog=evolution_catalog()).decode_sample_result(raw) == make_record()


def _field_names(version: SchemaVersion) -> set[str]:
    """The top-level field names of a version."""
    return {f["name"] for f in version.definition["fields"]}


def _accepts_none(annotation: Any) -> bool:
    """Whether a model field's annotation admits None."""
    return get_origin(annotation) in (Union, types.UnionType) and type(None) in get_args(annotation)


def _avro_nullable(avro_type: Any) -> bool:
    """Whether an Avro field type is a union with null."""
    return isinstance(avro_type, list) and "null" in avro_type


def _records(avro_type: Any) -> list[dict[str, Any]]:
    """Every record definition nested anywhere in an Avro type."""
    if isinstance(avro_type, list):
        return [r for t in avro_type for r in _records(t)]
    if not isinstance(avro_type, dict):
        return []
    found = [avro_type] if avro_type.get("type") == "record" else []
    nested = [f["type"] for f in avro_type.get("fields", [])]
    nested += [avro_type[k] for k in ("items", "values") if k in avro_type]
    return found + [r for t in nested for r in _records(t)]


# Released Avro record names that the models spell otherwise (a released schema never changes).
MODEL_NAMES = {"Worker": "WriterProcess"}


@pytest.mark.parametrize("name", sorted(MODEL_VERSIONS))
def test_model_fields_mirror_the_avro_fields(name: str) -> None:
    definition = shipped_catalog().get(name, MODEL_VERSIONS[name]).definition
    for record in _records(dict(definition)):
        model = getattr(schemas, MODEL_NAMES.get(record["name"], record["name"]))
        assert issubclass(model, BaseModel)
        avro_fields = {f["name"]: f["type"] for f in record["fields"]}
        assert list(model.model_fields) == list(avro_fields), record["name"]
        for field, info in model.model_fields.items():
            nullable = _avro_nullable(avro_fields[field])
            assert _accepts_none(info.annotation) == nullable, f"{record['name']}.{field}"
