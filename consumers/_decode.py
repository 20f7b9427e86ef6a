"""Decode one results-topic message: key and value must agree."""

from __future__ import annotations

from resultlog.schemas import Codec, DecodeError, RunKey, SampleResult

__all__ = ["RecordId", "decode_value"]

RecordId = tuple[RunKey, int, int]  # (run key, sample_index, epoch), decoded from a key


def decode_value(
    codec: Codec,
    key: RecordId,
    value: bytes,
    *,
    topic: str,
    partition: int,
    offset: int,
) -> SampleResult:
    """The record in `value`, checked against the (run key, sample_index, epoch) of its key."""
    record = codec.decode_sample_result(value, topic=topic, partition=partition, offset=offset)
    run_key, sample_index, epoch = key
    # Field by field: building the record's RunKey would validate it again.
    if (
        record.run_id != run_key.run_id
        or record.benchmark_id != run_key.benchmark_id
        or record.model != run_key.model
        or record.sample_index != sample_index
        or record.epoch != epoch
    ):
        raise DecodeError(
            f"key names {key[0]} sample {key[1]} epoch {key[2]} but the value is "
            f"{record.run_key} sample {record.sample_index} epoch {record.epoch}",
            value,
            topic=topic,
            partition=partition,
            offset=offset,
        )
    return record
