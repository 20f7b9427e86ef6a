"""Read partitions from their beginning up to the high watermarks taken when reading starts."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition

from resultlog.consumers.errors import ConsumerError

__all__ = ["scan"]

_BATCH = 10_000
_POLL_S = 0.1


def scan(
    consumer: Consumer, topic: str, partitions: Iterable[int], timeout_s: float
) -> tuple[dict[int, int], Iterator[Message]]:
    """The high watermarks of the partitions, and every message below them in offset order."""
    highs: dict[int, int] = {}
    ends: dict[int, int] = {}  # the partitions with messages to read
    for partition in partitions:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=timeout_s, cached=False
        )
        highs[partition] = high
        if high > low:
            ends[partition] = high
    return highs, _messages(consumer, topic, ends, timeout_s)


def _messages(
    consumer: Consumer, topic: str, ends: dict[int, int], timeout_s: float
) -> Iterator[Message]:
    if not ends:
        return
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    deadline = time.monotonic() + timeout_s
    while ends:
        # consume() waits until the batch is full or the timeout passes: keep the wait short.
        batch = consumer.consume(num_messages=_BATCH, timeout=_POLL_S)
        if batch:
            deadline = time.monotonic() + timeout_s
        elif time.monotonic() > deadline:
            raise ConsumerError(f"no data from {topic} within {timeout_s:.0f}s")
        for message in batch:
            error = message.error()
            if error is not None:
                raise KafkaException(error)
            partition, offset = message.partition(), message.offset()
            if partition not in ends or offset is None or offset >= ends[partition]:
                continue
            if offset >= ends[partition] - 1:
                del ends[partition]
            yield message
