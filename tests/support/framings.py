"""A record's value as each reader may meet it: other schema versions, registry framing."""

from __future__ import annotations

from io import BytesIO
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from fastavro import schemaless_writer

from resultlog.schemas import Codec, SampleResult, shipped_catalog
from resultlog.schemas._catalog import SAMPLE_RESULT
from tests.support.ledger import v1_value
from tests.support.schemas import fixture_v4

V2 = shipped_catalog().get(SAMPLE_RESULT, 2)


def v2_value(datum: dict[str, Any]) -> bytes:
    """A v2 single-object value of any datum, valid or not (no model checks it)."""
    body = BytesIO()
    schemaless_writer(body, V2.parsed, datum)
    return b"\xc3\x01" + V2.fingerprint + body.getvalue()


def framings(record: SampleResult) -> dict[str, tuple[Codec, bytes]]:
    """The record's value as each reader may meet it: v3, v2 (a record without a selection),
    v1 and future v4 writers, registry framing."""
    v4 = fixture_v4()
    datum = record.model_dump() | {"seed": 7, "tags": ["hard"]}
    datum["score"] = datum["score"] | {"confidence": 0.5}
    body = BytesIO()
    schemaless_writer(body, v4.parsed, datum)
    newer = Codec(catalog=shipped_catalog().with_versions([v4]))
    registry = Codec(registry_client=SchemaRegistryClient.new_client({"url": "mock://fold-view"}))
    met = {
        "v3": (Codec(), Codec().encode_sample_result(record)),
        "v1": (Codec(), v1_value(record)),
        "v4": (newer, b"\xc3\x01" + v4.fingerprint + body.getvalue()),
        "registry": (registry, registry.encode_sample_result(record, "fold-view-results")),
    }
    if record.selected_samples is None:  # what v2 cannot say
        met["v2"] = (Codec(), v2_value(record.model_dump()))
    return met
