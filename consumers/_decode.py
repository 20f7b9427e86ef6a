"""Decode one results-topic message: key and value must agree."""

from __future__ import annotations

from resultlog.schemas import Codec, DecodeError, RecordId, SampleResult

__all__ = ["decode_value"]


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
    return record
