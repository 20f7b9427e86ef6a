"""Decode one results-topic message: key and value must agree."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import NoReturn

from resultlog.consumers._contribution import Contribution
from resultlog.schemas import (
    Codec,
    DecodeError,
    FoldFields,
    FoldView,
    Location,
    RecordId,
    RunKey,
    SampleResult,
)

__all__ = ["created_us", "decode_contribution", "decode_value", "decode_view"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def created_us(record: SampleResult | FoldView) -> int:
    """A record's created_at in microseconds since the epoch (a view's wire milliseconds)."""
    if isinstance(record, FoldView):
        return record.created_at_ms * 1000
    return (record.created_at - _EPOCH) // _MICROSECOND


def decode_value(codec: Codec, key: RecordId, value: bytes, at: Location) -> SampleResult:
    """The record in `value`, read at `at`, checked against the record id of its key."""
    record = codec.decode_sample_result(value, at=at)
    _check_key(record, key, value, at)
    return record


def decode_view(codec: Codec, key: RecordId, value: bytes, at: Location) -> FoldView:
    """The fold view of the record in `value`, checked against the record id of its key."""
    view = codec.decode_fold_view(value, at=at)
    _check_key(view, key, value, at)
    return view


def decode_contribution(codec: Codec, key: RecordId, value: bytes, at: Location) -> Contribution:
    """What the record in `value` adds to its run, checked against the record id of its key
    (accepts and refuses exactly what `decode_view` does, without building a FoldView)."""
    fields = codec.decode_fold_fields(value, at=at)
    identity = (fields["run_id"], fields["benchmark_id"], fields["model"])
    if not _agrees(key, identity, fields["sample_index"], fields["epoch"]):
        _mismatch(key, _FieldsId(fields), value, at)
    return Contribution.of_fields(fields)


class _FieldsId:
    """The identity fields of FoldFields, read as a record's attributes (for the message)."""

    def __init__(self, fields: FoldFields) -> None:
        self.run_key = RunKey(fields["run_id"], fields["benchmark_id"], fields["model"])
        self.sample_index = fields["sample_index"]
        self.epoch = fields["epoch"]


def _check_key(record: SampleResult | FoldView, key: RecordId, value: bytes, at: Location) -> None:
    """Refuse a value whose run key, sample index or epoch is not its key's."""
    identity = (record.run_id, record.benchmark_id, record.model)
    if not _agrees(key, identity, record.sample_index, record.epoch):
        _mismatch(key, record, value, at)


def _agrees(key: RecordId, identity: tuple[str, str, str], sample_index: int, epoch: int) -> bool:
    """Whether a value's (run_id, benchmark_id, model), sample index and epoch are its key's
    (compared as text: building the value's RunKey would validate it again)."""
    run_key = key.run_key
    return (
        identity == (run_key.run_id, run_key.benchmark_id, run_key.model)
        and sample_index == key.sample_index
        and epoch == key.epoch
    )


def _mismatch(
    key: RecordId, record: SampleResult | FoldView | _FieldsId, value: bytes, at: Location
) -> NoReturn:
    """Refuse a value whose identity is not its key's."""
    raise DecodeError(
        f"key names {key.run_key} sample {key.sample_index} epoch {key.epoch} but the value is "
        f"{record.run_key} sample {record.sample_index} epoch {record.epoch}",
        value,
        at,
    )
