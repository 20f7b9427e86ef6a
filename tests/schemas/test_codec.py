"""The single-object codec: exact round trips, framing, and typed decode failures."""

from __future__ import annotations

import json
from io import BytesIO

import pytest
from fastavro import schemaless_writer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resultlog.schemas import (
    Codec,
    DecodeError,
    Location,
    OutOfRangeError,
    RunSummary,
    SampleResult,
    SchemaError,
    UnknownFormatVersionError,
    UnknownSchemaError,
    WireFormat,
    shipped_catalog,
)
from resultlog.schemas._catalog import RUN_SUMMARY, SAMPLE_RESULT
from tests.support.records import RecordFactory
from tests.support.strategies import run_summaries, sample_results

TOPIC = "resultlog.sample-results"
_EMPTY = 0xC15D213AA4D7A795


def rabin64(data: bytes) -> int:
    """CRC-64-AVRO as the Avro specification's reference code computes it."""
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_EMPTY & -(fp & 1))
        table.append(fp)
    fp = _EMPTY
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


def _body(record: SampleResult, version_format: int = 1) -> bytes:
    """A raw Avro body of the current schema, format_version forced."""
    datum = record.model_dump() | {"format_version": version_format}
    buf = BytesIO()
    schemaless_writer(buf, shipped_catalog().current(SAMPLE_RESULT).parsed, datum)
    return buf.getvalue()


def test_single_object_header_is_magic_plus_little_endian_fingerprint(
    codec: Codec, make_record: RecordFactory
) -> None:
    current = shipped_catalog().current(SAMPLE_RESULT)
    raw = codec.encode_sample_result(make_record(), TOPIC)
    expected = rabin64(current.canonical.encode()).to_bytes(8, "little")
    assert raw[:2] == b"\xc3\x01"
    assert raw[2:10] == expected == current.fingerprint
    assert raw[10:] == _body(make_record())
    assert codec.wire_format is WireFormat.SINGLE_OBJECT


def test_fingerprint_matches_the_avro_specification_test_vector() -> None:
    # Avro's schema-tests.txt: the fingerprint of "null" is 7195948357588979594.
    assert rabin64(b'"null"') == 7195948357588979594


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(sample_results())
def test_sample_results_round_trip_exactly(record: SampleResult) -> None:
    codec = Codec()
    assert codec.decode_sample_result(codec.encode_sample_result(record)) == record


@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(run_summaries())
def test_run_summaries_round_trip_exactly(summary: RunSummary) -> None:
    codec = Codec()
    assert codec.decode_run_summary(codec.encode_run_summary(summary)) == summary


def test_degraded_record_round_trips(codec: Codec, degraded_record: SampleResult) -> None:
    decoded = codec.decode_sample_result(codec.encode_sample_result(degraded_record))
    assert decoded == degraded_record and decoded.degraded


def test_decode_accepts_bytearray_and_memoryview(codec: Codec, make_record: RecordFactory) -> None:
    raw = codec.encode_sample_result(make_record())
    assert codec.decode_sample_result(bytearray(raw)) == make_record()
    assert codec.decode_sample_result(memoryview(raw)) == make_record()


def test_encode_refuses_the_wrong_model(codec: Codec, summary: RunSummary) -> None:
    with pytest.raises(TypeError, match="expected SampleResult"):
        codec.encode_sample_result(summary)  # type: ignore[arg-type]  # deliberately ill-typed: the check at run time is under test


def _decode_error(codec: Codec, raw: bytes | None) -> DecodeError:
    """The error decoding these bytes raises, located at a made-up offset."""
    with pytest.raises(DecodeError) as info:
        codec.decode_sample_result(raw, at=Location(TOPIC, 2, 41))
    assert info.value.raw == raw
    assert (info.value.topic, info.value.partition, info.value.offset) == (TOPIC, 2, 41)
    assert f"{TOPIC}[2]@41" in str(info.value)
    return info.value


@pytest.mark.parametrize("raw", [None, b""])
def test_empty_values_are_decode_errors(codec: Codec, raw: bytes | None) -> None:
    assert "empty value" in _decode_error(codec, raw).reason


def test_truncated_values_are_decode_errors(codec: Codec, make_record: RecordFactory) -> None:
    raw = codec.encode_sample_result(make_record())
    assert "truncated single-object header" in _decode_error(codec, raw[:6]).reason
    assert "malformed Avro body" in _decode_error(codec, raw[:-3]).reason
    assert "truncated registry header" in _decode_error(codec, b"\x00\x00\x01").reason


def test_trailing_bytes_are_decode_errors(codec: Codec, make_record: RecordFactory) -> None:
    raw = codec.encode_sample_result(make_record()) + b"\x00"
    assert "1 trailing bytes" in _decode_error(codec, raw).reason


def test_unknown_fingerprint_is_an_unknown_schema_error(
    codec: Codec, make_record: RecordFactory
) -> None:
    raw = b"\xc3\x01" + bytes(8) + _body(make_record())
    error = _decode_error(codec, raw)
    assert isinstance(error, UnknownSchemaError)
    assert "unknown schema fingerprint 0000000000000000" in error.reason


def test_registry_framing_without_a_registry_is_a_clear_error(
    codec: Codec, make_record: RecordFactory
) -> None:
    error = _decode_error(codec, b"\x00\x00\x00\x00\x07" + _body(make_record()))
    assert isinstance(error, UnknownSchemaError)
    assert "schema id 7" in error.reason and "no registry is configured" in error.reason


def test_a_summary_is_not_read_as_a_sample_result(codec: Codec, summary: RunSummary) -> None:
    error = _decode_error(codec, codec.encode_run_summary(summary))
    assert isinstance(error, UnknownSchemaError)
    assert f"is a {RUN_SUMMARY} schema, expected {SAMPLE_RESULT}" in error.reason


@pytest.mark.parametrize("version", [2, 0, -1])
def test_unknown_format_version_names_the_version(
    codec: Codec, make_record: RecordFactory, version: int
) -> None:
    raw = shipped_catalog().current(SAMPLE_RESULT).fingerprint
    error = _decode_error(codec, b"\xc3\x01" + raw + _body(make_record(), version))
    assert isinstance(error, UnknownFormatVersionError)
    assert f"unknown format_version {version} (this reader knows 1)" in error.reason


def test_contract_violations_in_valid_avro_are_decode_errors(
    codec: Codec, make_record: RecordFactory
) -> None:
    datum = make_record().model_dump() | {"epoch": 5, "epochs": 2}
    buf = BytesIO(b"\xc3\x01" + shipped_catalog().current(SAMPLE_RESULT).fingerprint)
    buf.seek(0, 2)
    schemaless_writer(buf, shipped_catalog().current(SAMPLE_RESULT).parsed, datum)
    error = _decode_error(codec, buf.getvalue())
    assert "violates the contract" in error.reason and "epoch must be < epochs" in error.reason
    assert isinstance(error.__cause__, ValueError)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("usage", "input_tokens"), 2**62),
        (("usage", "total_cost"), 1e308),
        (("generation_time_ms",), 2**62),
        (("score", "metrics"), {"reward": 1.7e308}),
    ],
)
def test_out_of_range_numbers_in_valid_avro_are_out_of_range_errors(
    codec: Codec, make_record: RecordFactory, path: tuple[str, ...], value: object
) -> None:
    datum = make_record().model_dump()
    target = datum
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    current = shipped_catalog().current(SAMPLE_RESULT)
    buf = BytesIO(b"\xc3\x01" + current.fingerprint)
    buf.seek(0, 2)
    schemaless_writer(buf, current.parsed, datum)
    error = _decode_error(codec, buf.getvalue())
    assert isinstance(error, OutOfRangeError)
    assert path[-1] in error.reason


def test_garbage_framing_is_a_decode_error(codec: Codec) -> None:
    assert "unrecognised framing: first byte 0x7b" in _decode_error(codec, b'{"a": 1}').reason


@settings(max_examples=300)
@given(st.binary(max_size=64))
def test_random_bytes_after_a_valid_header_only_raise_decode_errors(tail: bytes) -> None:
    codec = Codec()
    header = b"\xc3\x01" + shipped_catalog().current(SAMPLE_RESULT).fingerprint
    with pytest.raises(DecodeError):
        codec.decode_sample_result(header + tail)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_corrupted_records_decode_or_raise_decode_errors(data: st.DataObject) -> None:
    codec = Codec()
    raw = bytearray(codec.encode_sample_result(data.draw(sample_results())))
    position = data.draw(st.integers(10, len(raw) - 1))
    raw[position] = data.draw(st.integers(0, 255))
    try:
        decoded = codec.decode_sample_result(bytes(raw))
    except DecodeError:
        return
    assert isinstance(decoded, SampleResult)


def test_decode_error_at_keeps_class_and_cause(codec: Codec) -> None:
    with pytest.raises(UnknownSchemaError) as info:
        codec.decode_sample_result(b"\xc3\x01" + bytes(8) + b"\x02")
    located = info.value.at(Location("t", 1, 2))
    assert type(located) is UnknownSchemaError
    assert located.raw == info.value.raw and located.reason == info.value.reason
    assert str(located).startswith("cannot decode record at t[1]@2 (11 bytes)")


@pytest.mark.mock_registry
def test_registry_framing_needs_a_topic_to_encode(make_record: RecordFactory) -> None:
    with (
        Codec(registry_url="mock://needs-topic") as codec,
        pytest.raises(SchemaError, match="needs the topic"),
    ):
        codec.encode_sample_result(make_record())


def test_json_text_is_carried_verbatim(codec: Codec, make_record: RecordFactory) -> None:
    blob = json.dumps({"steps": [1, 2, {"tool": "calc"}]}, indent=2)
    decoded = codec.decode_sample_result(codec.encode_sample_result(make_record(metadata=blob)))
    assert decoded.metadata == blob
