"""Resume's fold views (one pass through `Ingestor.read`, else `decode_view`) are exactly
what the specification decides (`decode_key`, then fastavro and FoldView's validation): the
same views, in the same order, the same refusals said once each; and a view built without
validation is the validated one."""

from __future__ import annotations

import gc
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from resultlog.consumers._decode import _validated_view, decode_view, view_of
from resultlog.consumers._ingest import Ingestor
from resultlog.consumers.resume import _building, _decode_latest, _decode_views
from resultlog.kafka import KafkaConnection
from resultlog.schemas import (
    Codec,
    ConfigurationError,
    FoldView,
    Location,
    RecordError,
    RunKey,
    SampleResult,
    Score,
    Usage,
    decode_key,
    encode_key,
)
from resultlog.settings import Settings
from tests.support.framings import framings, v2_value
from tests.support.records import make_record
from tests.support.strategies import sample_results

PARTITION = 3
_MODELS: dict[str, type[BaseModel]] = {
    "usage": Usage,
    "score": Score,
    "error": RecordError,
}
_TAILS = st.sampled_from(
    ["0/0", "00/0", "1/01", "7/-1", "1" * 19 + "/0", "1" * 18 + "/1", "x/0", "3/", "/3", "3"]
) | st.text(alphabet="0123456789/x", max_size=12)


WHERE = Location("results", PARTITION, 11)


def _reader(codec: Codec, run_key: RunKey) -> Ingestor:
    """An ingestor that expects `run_key` in PARTITION, as resume's."""
    ingestor = Ingestor(codec, 6)
    ingestor.expect(run_key, PARTITION)
    return ingestor


def _kafka(codec: Codec | None = None) -> KafkaConnection:
    """A connection never connected: the readers take only its codec and topic name."""
    return KafkaConnection(Settings(bootstrap_servers="127.0.0.1:1"), codec or Codec())


def _same_model(ours: BaseModel, theirs: BaseModel) -> None:
    """The same model, value by value and type by type (a StrEnum equals its str), with
    pydantic's bookkeeping alike."""
    assert type(ours) is type(theirs)
    assert list(ours.__dict__) == list(theirs.__dict__)
    for name, value in theirs.__dict__.items():
        mine = ours.__dict__[name]
        assert type(mine) is type(value), name
        if isinstance(value, BaseModel):
            _same_model(mine, value)
        elif isinstance(value, dict):
            assert [(k, type(k), v, type(v)) for k, v in mine.items()] == [
                (k, type(k), v, type(v)) for k, v in value.items()
            ], name
            assert mine is not value
        else:
            assert mine == value, name  # no NaN: every float is bounded
    assert ours.model_fields_set == theirs.model_fields_set
    assert ours.__pydantic_extra__ == theirs.__pydantic_extra__
    assert ours.__pydantic_private__ == theirs.__pydantic_private__
    assert ours == theirs


def _constructed(view: FoldView) -> FoldView:
    """pydantic's own `model_construct` of a view's values."""
    fields: dict[str, Any] = dict(view.__dict__)
    for name, model in _MODELS.items():
        if fields[name] is not None:
            fields[name] = model.model_construct(**fields[name].__dict__)
    return FoldView.model_construct(**fields)


@contextmanager
def _said() -> Iterator[list[str]]:
    """What resume logs while the block runs (addresses in reasons blanked)."""
    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(re.sub("0x[0-9a-f]+", "0x", record.getMessage()))

    logger = logging.getLogger("resultlog.consumers.resume")
    keep = Keep()
    logger.addHandler(keep)
    try:
        yield said
    finally:
        logger.removeHandler(keep)


def _decided(
    kafka: KafkaConnection,
    run_key: RunKey,
    latest: dict[bytes, tuple[int, bytes]],
    samples: range | None = None,
) -> None:
    """Resume's reader and the specification decide `latest` alike."""
    with _said() as said_fast:
        fast, fast_reasons = _decode_views(kafka, run_key, latest, PARTITION, samples)
    with _said() as said_full:
        full, full_reasons = _decode_latest(kafka, latest, PARTITION, _validated_view, samples)
    assert len(fast) == len(full)
    for ours, theirs in zip(fast, full, strict=True):
        _same_model(ours, theirs)
    assert fast_reasons == full_reasons
    assert said_fast == said_full
    assert len(said_full) == full_reasons.total(), "one warning per refused record"


def _latest(record: SampleResult, value: bytes, tail: str | None = None) -> dict[bytes, Any]:
    key = encode_key(record.run_key, record.sample_index, record.epoch)
    if tail is not None:
        key = key.rsplit(b"/", 2)[0] + b"/" + tail.encode()
    return {key: (11, value)}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=sample_results())
def test_a_view_built_without_validation_is_the_validated_one(record: SampleResult) -> None:
    codec = Codec()
    values = [codec.encode_sample_result(record)]
    if record.selected_samples is None:
        values.append(v2_value(record.model_dump()))
    reader = _reader(codec, record.run_key)
    for value in values:
        prefix = reader.read(record.key, value, PARTITION)
        assert prefix is not None, "a common record takes the one-pass path"
        view = view_of(prefix)
        validated = codec.decode_fold_view(value)
        _same_model(view, validated)
        _same_model(_constructed(validated), view)
        _same_model(decode_view(codec, decode_key(record.key), value, WHERE), validated)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=sample_results())
def test_every_framing_is_decided_as_the_full_path_decides_it(record: SampleResult) -> None:
    for name, (codec, value) in framings(record).items():
        fast = _reader(codec, record.run_key).read(record.key, value, PARTITION)
        assert (fast is not None) == (name in ("v3", "v2")), name
        _decided(_kafka(codec), record.run_key, _latest(record, value))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    record=sample_results(),
    v2=st.booleans(),
    edits=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 400),
)
def test_mutated_values_are_decided_as_the_full_path_decides_them(
    record: SampleResult, v2: bool, edits: list[tuple[int, int]], cut: int | None
) -> None:
    if v2:
        record = record.model_copy(update={"selected_samples": None})
    value = bytearray(v2_value(record.model_dump()) if v2 else Codec().encode_sample_result(record))
    for position, byte in edits:
        value[position % len(value)] = byte
    raw = bytes(value if cut is None else value[:cut])
    _decided(_kafka(), record.run_key, _latest(record, raw))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=sample_results(), tail=_TAILS)
def test_odd_keys_are_decided_as_the_full_path_decides_them(
    record: SampleResult, tail: str
) -> None:
    value = Codec().encode_sample_result(record)
    latest = _latest(record, value, tail)
    _decided(_kafka(), record.run_key, latest)
    (key,) = latest
    prefix = _reader(Codec(), record.run_key).read(key, value, PARTITION)
    if prefix is not None:  # read only where decode_key reads the same
        assert decode_key(key) == (record.run_key, prefix.sample_index, prefix.epoch)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    indexes=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 2)), max_size=12, unique=True),
    broken=st.sets(st.integers(0, 11)),
    other=st.sets(st.integers(0, 11)),
    samples=st.none() | st.builds(range, st.integers(0, 9), st.integers(0, 10)),
)
def test_a_run_is_read_in_order_with_its_samples_and_refusals(
    indexes: list[tuple[int, int]], broken: set[int], other: set[int], samples: range | None
) -> None:
    codec = Codec()
    ours, theirs = RunKey("run-1", "arith", "m"), RunKey("run-2", "arith", "m")
    latest: dict[bytes, tuple[int, bytes]] = {}
    for at, (index, epoch) in enumerate(indexes):
        record = make_record(index, epoch, run_key=theirs if at in other else ours)
        value = codec.encode_sample_result(record)
        if at in broken:
            value = value[: len(value) // 2]
        latest[encode_key(ours, index, epoch)] = (at, value)
    _decided(_kafka(codec), ours, latest, samples)


def test_registry_framed_records_without_a_registry_stop_both_paths() -> None:
    record = make_record(1, 0)
    registry = framings(record)["registry"][1]
    latest = _latest(record, registry)
    kafka = _kafka()
    with pytest.raises(ConfigurationError):
        _decode_views(kafka, record.run_key, latest, PARTITION)
    with pytest.raises(ConfigurationError):
        _decode_latest(kafka, latest, PARTITION, _validated_view)


def test_resume_leaves_the_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    with pytest.raises(ValueError), _building():
        assert not gc.isenabled()
        raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        with _building():
            pass
        assert not gc.isenabled(), "a collector someone turned off stays off"
    finally:
        gc.enable()
