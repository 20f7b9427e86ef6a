"""The fold view: the folded fields of any record, in any framing, as the full decode has them."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from resultlog.consumers._decode import decode_contribution
from resultlog.schemas import (
    MAX_COST_USD,
    MAX_INDEX,
    MAX_METRIC,
    MAX_MILLIS,
    MAX_TOKENS,
    Codec,
    DecodeError,
    FoldView,
    Location,
    OutOfRangeError,
    SampleResult,
    UnknownFormatVersionError,
    decode_key,
)
from resultlog.schemas._view import FOLD_FIELDS
from tests.support.framings import framings, v2_value
from tests.support.records import RecordFactory
from tests.support.strategies import sample_results

ROOT = Path(__file__).resolve().parents[2]
VECTORS = json.loads((ROOT / "schemas" / "conformance.json").read_text(encoding="utf-8"))
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
WHERE = Location("results", 3, 41)


def same_fields(view: FoldView, record: SampleResult) -> bool:
    """Whether the view holds the record's value of every folded field."""
    millis = (record.created_at - EPOCH) // timedelta(milliseconds=1)
    return view.created_at_ms == millis and all(
        getattr(view, name) == getattr(record, name) for name in FOLD_FIELDS if name != "created_at"
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=sample_results())
def test_the_view_holds_the_full_decodes_folded_fields_in_every_framing(
    record: SampleResult,
) -> None:
    for name, (codec, raw) in framings(record).items():
        full = codec.decode_sample_result(raw)
        assert same_fields(codec.decode_fold_view(raw), full), name


def test_every_golden_vector_reads_as_its_full_decode() -> None:
    codec = Codec()
    for vector in VECTORS["records"]:
        raw = bytes.fromhex(vector["single_object_hex"])
        view = codec.decode_fold_view(raw)
        assert same_fields(view, codec.decode_sample_result(raw)), vector["name"]
        assert view.created_at_ms == vector["datum"]["created_at"]


# A folded field set out of the contract, and the error both decoders raise for it.
BAD_FIELDS: list[tuple[str, Any, type[DecodeError]]] = [
    ("usage.input_tokens", -1, OutOfRangeError),
    ("usage.total_tokens", MAX_TOKENS + 1, OutOfRangeError),
    ("usage.total_cost", math.nan, OutOfRangeError),
    ("usage.total_cost", MAX_COST_USD * 2, OutOfRangeError),
    ("score.numeric", 1.5, OutOfRangeError),
    ("score.metrics", {"reward": MAX_METRIC * 10}, OutOfRangeError),
    ("score.metrics", {"reward": math.inf}, OutOfRangeError),
    ("sample_index", MAX_INDEX + 1, OutOfRangeError),
    ("generation_time_ms", MAX_MILLIS + 1, OutOfRangeError),
    ("spent_cost", -1.0, OutOfRangeError),
    ("attempts", -1, OutOfRangeError),
    ("epochs", 0, OutOfRangeError),
    ("sample_id", "", DecodeError),
    ("run_id", "", DecodeError),
    ("config_fingerprint", "", DecodeError),
    ("epoch", 3, DecodeError),  # not < epochs
    ("spent_cost", 1e-9, DecodeError),  # less than usage.total_cost
    ("status", "degraded", DecodeError),  # without an error
    ("created_at", 2**62, DecodeError),  # no datetime
    ("format_version", 2, UnknownFormatVersionError),
]


@pytest.mark.parametrize(("path", "value", "expected"), BAD_FIELDS)
def test_a_bad_folded_field_fails_the_full_decode_the_view_and_the_contribution_alike(
    make_record: RecordFactory, path: str, value: Any, expected: type[DecodeError]
) -> None:
    record = make_record(dataset_size=None, epochs=3, epoch=1)
    datum = record.model_dump()
    *parents, leaf = path.split(".")
    target = datum
    for part in parents:
        target = target[part]
    target[leaf] = value
    raw = v2_value(datum)
    codec = Codec()
    with pytest.raises(DecodeError) as full:
        codec.decode_sample_result(raw, at=WHERE)
    with pytest.raises(DecodeError) as view:
        codec.decode_fold_view(raw, at=WHERE)
    with pytest.raises(DecodeError) as fields:
        decode_contribution(codec, decode_key(record.key), raw, WHERE)
    assert type(full.value) is type(view.value) is type(fields.value) is expected
    assert str(fields.value) == str(view.value)
    for error in (full.value, view.value, fields.value):
        assert error.raw == raw
        assert (error.topic, error.partition, error.offset) == ("results", 3, 41)


def test_a_value_cut_inside_the_folded_fields_is_undecodable(make_record: RecordFactory) -> None:
    raw = Codec().encode_sample_result(make_record())
    with pytest.raises(DecodeError) as view:
        Codec().decode_fold_view(raw[:40], at=WHERE)
    assert type(view.value) is DecodeError and view.value.raw == raw[:40]


def test_bytes_after_the_folded_fields_are_not_read(make_record: RecordFactory) -> None:
    """The documented limit: only the full decode sees what follows `error`."""
    record = make_record()
    datum = record.model_dump() | {"config": '{"a": 1}', "config_fingerprint": None}
    raw = v2_value(datum) + b"trailing"
    with pytest.raises(DecodeError):
        Codec().decode_sample_result(raw)
    assert same_fields(Codec().decode_fold_view(raw), record)


def test_the_view_refuses_what_the_full_decode_refuses_before_reading(
    summary: Any,
) -> None:
    codec = Codec()
    for raw in (None, b"", b"\x07garbage", codec.encode_run_summary(summary)):
        with pytest.raises(DecodeError) as full:
            codec.decode_sample_result(raw)
        with pytest.raises(DecodeError) as view:
            codec.decode_fold_view(raw)
        assert type(full.value) is type(view.value)
