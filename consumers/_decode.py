"""Decode one results-topic message: key and value must agree."""

from __future__ import annotations

from resultlog.schemas import Codec, DecodeError, FoldView, RecordId, SampleResult

__all__ = ["decode_value", "decode_view"]


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
        raise DecodeError(
            f"key names {run_key} sample {key.sample_index} epoch {key.epoch} but the value is "
            f"{record.run_key} sample {record.sample_index} epoch {record.epoch}",
            value,
            topic=topic,
            partition=partition,
            offset=offset,
        )
