"""Read partitions from their beginning up to the high watermarks taken when reading starts,
or one partition's offset ranges."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from resultlog.consumers.errors import ConsumerError
from resultlog.kafka import arrived

__all__ = ["TRANSIENT", "scan", "scan_ranges", "watermark_offsets"]

_BATCH = 10_000
_POLL_S = 0.1
# Read errors that settle in moments: a partition with no leader yet (a topic just created,
# a leader moving), a dropped connection.
TRANSIENT = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TRANSPORT,
    }
)


def watermark_offsets(consumer: Consumer, tp: TopicPartition, timeout_s: float) -> tuple[int, int]:
    """The partition's low and high watermarks, retried while the error is TRANSIENT."""
    deadline = time.monotonic() + timeout_s
    pause = 0.05
    while True:
        left = max(0.1, deadline - time.monotonic())
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=left, cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() not in TRANSIENT or time.monotonic() + pause >= deadline:
                raise
        time.sleep(pause)
        pause = min(1.0, pause * 2)


def scan(
    consumer: Consumer, topic: str, partitions: Iterable[int], timeout_s: float
) -> tuple[dict[int, int], Iterator[Message]]:
    """The high watermarks of the partitions, and every message below them in offset order."""
    highs: dict[int, int] = {}
    ends: dict[int, int] = {}  # the partitions with messages to read
    for partition in partitions:
        low, high = watermark_offsets(consumer, TopicPartition(topic, partition), timeout_s)
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
    batches = _Batches(consumer, topic, timeout_s)
    while True:
        for message in batches.next():
            partition, offset = message.partition(), message.offset()
            if partition not in ends or offset is None or offset >= ends[partition]:
                continue
            if offset >= ends[partition] - 1:
                del ends[partition]
            yield message
        if not ends:
            return


def scan_ranges(
    consumer: Consumer,
    topic: str,
    partition: int,
    ranges: Sequence[tuple[int, int]],
    timeout_s: float,
) -> Iterator[Message]:
    """The messages of one partition whose offsets lie in the sorted, disjoint half-open
    `ranges`, in offset order; each range ends below the partition's high watermark."""
    next_offset = 0  # never yield an offset twice, whatever a fetch delivers late
    for start, end in ranges:
        if end <= max(start, next_offset):
            continue
        consumer.assign([TopicPartition(topic, partition, max(start, next_offset))])
        batches = _Batches(consumer, topic, timeout_s)
        while True:
            # No more than what is left of the range: a fetch that ran past its end is not
            # turned into Python messages only to be dropped.
            for message in batches.next(end - max(start, next_offset)):
                offset = message.offset()
                if message.partition() != partition or offset is None:
                    continue
                if offset < max(start, next_offset):
                    continue
                # Compaction leaves holes: the first offset past the range ends it too.
                next_offset = offset + 1 if offset < end else end
                if offset >= end:
                    break
                yield message
            if next_offset >= end:
                break


class _Batches:
    """Batches of the assigned partitions' messages (errors raised); fails after `timeout_s`
    without any."""

    def __init__(self, consumer: Consumer, topic: str, timeout_s: float) -> None:
        self._consumer = consumer
        self._topic = topic
        self._timeout_s = timeout_s
        self._deadline = time.monotonic() + timeout_s

    def next(self, limit: int = _BATCH) -> list[Message]:
        """The messages already fetched (at most `limit`), else the first to arrive soon."""
        batch = arrived(self._consumer, max(1, min(limit, _BATCH)), _POLL_S)
        if batch:
            self._deadline = time.monotonic() + self._timeout_s
        elif time.monotonic() > self._deadline:
            raise ConsumerError(f"no data from {self._topic} within {self._timeout_s:.0f}s")
        for message in batch:
            error = message.error()
            if error is not None:
                raise KafkaException(error)
        return batch
