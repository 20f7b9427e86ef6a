"""Decode one results-topic message: key and value must agree."""

from __future__ import annotations

from typing import NoReturn

from resultlog.consumers._contribution import Contribution
from resultlog.schemas import (
    Codec,
    DecodeError,
    FoldFields,
    FoldView,
    RecordId,
    RunKey,
    SampleResult,
)

__all__ = ["decode_contribution", "decode_value", "decode_view"]


def decode_value(
    codec: Codec,
    key: RecordId,
    value: bytes,
    *,
    topic: str,
    partition: int,
    offset: int,
) -> SampleResult:
    """The record in `value`, checked against the record id of its key."""
    record = codec.decode_sample_result(value, topic=topic, partition=partition, offset=offset)
    _check_key(record, key, value, topic=topic, partition=partition, offset=offset)
    return record


def decode_view(
    codec: Codec,
    key: RecordId,
    value: bytes,
    *,
    topic: str,
    partition: int,
    offset: int,
) -> FoldView:
    """The fold view of the record in `value`, checked against the record id of its key."""
    view = codec.decode_fold_view(value, topic=topic, partition=partition, offset=offset)
    _check_key(view, key, value, topic=topic, partition=partition, offset=offset)
    return view


def decode_contribution(
    codec: Codec,
    key: RecordId,
    value: bytes,
    *,
    topic: str,
    partition: int,
    offset: int,
) -> Contribution:
    """What the record in `value` adds to its run, checked against the record id of its key
    (accepts and refuses exactly what `decode_view` does, without building a FoldView)."""
    fields = codec.decode_fold_fields(value, topic=topic, partition=partition, offset=offset)
    run_key = key.run_key
    if (
        fields["run_id"] != run_key.run_id
        or fields["benchmark_id"] != run_key.benchmark_id
        or fields["model"] != run_key.model
        or fields["sample_index"] != key.sample_index
        or fields["epoch"] != key.epoch
    ):
        _mismatch(key, _FieldsId(fields), value, topic=topic, partition=partition, offset=offset)
    return Contribution.of_fields(fields)


class _FieldsId:
    """The identity fields of FoldFields, read as a record's attributes (for the message)."""

    def __init__(self, fields: FoldFields) -> None:
        self.run_key = RunKey(fields["run_id"], fields["benchmark_id"], fields["model"])
        self.sample_index = fields["sample_index"]
        self.epoch = fields["epoch"]


def _check_key(
    record: SampleResult | FoldView,
    key: RecordId,
    value: bytes,
    *,
    topic: str,
    partition: int,
    offset: int,
) -> None:
    """Refuse a value whose run key, sample index or epoch is not its key's."""
    run_key = key.run_key
    # Field by field: building the record's RunKey would validate it again.
    if (
        record.run_id != run_key.run_id
        or record.benchmark_id != run_key.benchmark_id
        or record.model != run_key.model
        or record.sample_index != key.sample_index
        or record.epoch != key.epoch
    ):
        _mismatch(key, record, value, topic=topic, partition=partition, offset=offset)


def _mismatch(
    key: RecordId,
    record: SampleResult | FoldView | _FieldsId,
    value: bytes,
    *,
    topic: str,
    partition: int,
    offset: int,
) -> NoReturn:
    """Refuse a value whose identity is not its key's."""
    raise DecodeError(
        f"key names {key.run_key} sample {key.sample_index} epoch {key.epoch} but the value is "
        f"{record.run_key} sample {record.sample_index} epoch {record.epoch}",
        value,
        topic=topic,
        partition=partition,
        offset=offset,
    )
