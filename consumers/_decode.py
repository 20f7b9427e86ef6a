"""Decode one results-topic message: key and value must agree."""

from __future__ import annotations

from typing import NamedTuple

from resultlog.schemas import Codec, DecodeError, RunKey, SampleResult, decode_key

__all__ = ["RecordId", "decode_record_id", "decode_value"]


class RecordId(NamedTuple):
    """What a results-topic key names: one (sample, epoch) of one run key."""

    run_key: RunKey
    sample_index: int
    epoch: int


def decode_record_id(raw: bytes) -> RecordId:
    """The record id a key names; DecodeError if it is not a key of ours."""
    return RecordId._make(decode_key(raw))


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
