"""Decode one results-topic message: key and value must agree."""

from __future__ import annotations

from schemas import Codec, DecodeError, RunKey, SampleResult

__all__ = ["decode_value"]


def decode_value(
    codec: Codec,
    key: tuple[RunKey, int, int],
    value: bytes,
    *,
    topic: str,
    partition: int,
    offset: int,
) -> SampleResult:
    """The record in `value`, checked against the (run key, sample_index, epoch) of its key."""
    record = codec.decode_sample_result(value, topic=topic, partition=partition, offset=offset)
    if (record.run_key, record.sample_index, record.epoch) != key:
        raise DecodeError(
            f"key names {key[0]} sample {key[1]} epoch {key[2]} but the value is "
            f"{record.run_key} sample {record.sample_index} epoch {record.epoch}",
            value,
            topic=topic,
            partition=partition,
            offset=offset,
        )
    return record
