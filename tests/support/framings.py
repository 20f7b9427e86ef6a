"""A record's value as each reader may meet it: other schema versions, registry framing."""

from __future__ import annotations

from io import BytesIO
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from fastavro import schemaless_writer

from resultlog.schemas import Codec, SampleResult, shipped_catalog
from resultlog.schemas._catalog import SAMPLE_RESULT
from tests.support.ledger import v1_value
from tests.support.schemas import fixture_v3

V2 = shipped_catalog().get(SAMPLE_RESULT, 2)


def v2_value(datum: dict[str, Any]) -> bytes:
    """A v2 single-object value of any datum, valid or not (no model checks it)."""
    body = BytesIO()
    schemaless_writer(body, V2.parsed, datum)
    return b"\xc3\x01" + V2.fingerprint + body.getvalue()


def framings(record: SampleResult) -> dict[str, tuple[Codec, bytes]]:
    """The record's value as each reader meets it: v2, v1 and v3 writers, registry framing."""
    v3 = fixture_v3()
    datum = record.model_dump() | {"seed": 7, "tags": ["hard"]}
    datum["score"] = datum["score"] | {"confidence": 0.5}
    body = BytesIO()
    schemaless_writer(body, v3.parsed, datum)
    newer = Codec(catalog=shipped_catalog().with_versions([v3]))
    registry = Codec(registry_client=SchemaRegistryClient.new_client({"url": "mock://fold-view"}))
    return {
        "v2": (Codec(), Codec().encode_sample_result(record)),
        "v1": (Codec(), v1_value(record)),
        "v3": (newer, b"\xc3\x01" + v3.fingerprint + body.getvalue()),
        "registry": (registry, registry.encode_sample_result(record, "fold-view-results")),
    }
