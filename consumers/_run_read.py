"""Read one run key's messages: through the run index when it can be used, else its partition.

The index (see `_index_codec`) says which offset intervals of the partition hold the run's
records and below which offset every record is indexed. A reader then reads the run's
intervals and the tail from "indexed through" to the high watermark. It is never needed
for correctness: without a usable entry (no index topic, no entry, no "indexed through", a
corrupt or foreign record, one of another topic ID: see `_index_check`) the whole partition
is read, as before, and the reader says so once at INFO; a guided read that meets a record
proving the entry wrong goes on with the whole partition. Callers filter messages by key
either way: intervals may be coarse.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from resultlog.consumers._index_check import (
    Entry,
    UnusableIndexError,
    checked_entry,
    checked_marker,
    guarded,
    results_log,
)
from resultlog.consumers._index_codec import MARKER_KEY, IndexedLog
from resultlog.consumers._scan import scan, scan_ranges, watermark_offsets
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, partition_for, run_key_prefix

__all__ = ["RunRead", "index_partition", "index_ranges", "one_run_reader", "read_run"]

log = logging.getLogger(__name__)

# A one-run reader fetches about what its ranges hold: a run's records are few, and a reader
# of one run must not pull megabytes past them into librdkafka (nor queue 64 MB ahead, its
# default). The limit counts compressed bytes, and the broker sends whole batches: a fetch
# that ends past a range brings that many bytes of other runs' records, each batch of them
# decompressed. So it is sized for compressed records (zstd), not raw ones; a fetch that
# falls short costs one more round trip, one that overshoots costs its batches. Measured on
# a 100-record run and its probe, next to 1.7 kB records in zstd batches: 6.6-7.0 ms with
# 164 kB fetches, 2.6-2.9 ms with 16-32 kB ones.
_RECORD_BYTES = 256
_MIN_FETCH = 16 * 1024
_MAX_FETCH = 1024 * 1024
_QUEUE_FETCHES = 4  # fetches queued ahead of the reader, at most
# A whole batch comes however small the fetch: a queue limit below a batch's size holds each
# next fetch back for fetch.queue.backoff.ms. Producers batch up to 1 MB (librdkafka's
# batch.size), uncompressed.
_MIN_QUEUE = 1024 * 1024
_QUEUE_MESSAGES = 100_000  # librdkafka's default
# The end of every range is known (below the high watermark): no fetch need wait for data.
_FETCH_WAIT_MS = 5
# The reader of the run index (and of the results partition's watermarks): an index partition
# is read whole, and is small.
_PLANNER = {
    "max.partition.fetch.bytes": _MAX_FETCH,
    "fetch.max.bytes": _MAX_FETCH * _QUEUE_FETCHES,
    "queued.max.messages.kbytes": _MAX_FETCH * _QUEUE_FETCHES // 1024,
    "fetch.queue.backoff.ms": 10,
    "fetch.wait.max.ms": _FETCH_WAIT_MS,
}
READ_GAP = 2000  # offsets between two ranges read in one go rather than seeking past


@dataclass(frozen=True)
class RunRead:
    """One run key's partition, the high watermark read up to, and its messages below it
    (the run's, and maybe others': filter by key)."""

    partition: int
    end: int
    messages: Iterator[Message]
    guided: bool  # read through the index (False: the whole partition)


def one_run_reader(offsets: int) -> dict[str, Any]:
    """Consumer settings for reading `offsets` offsets of one partition: fetches and a queue
    bounded by what the ranges hold, no fetch held back waiting for data."""
    fetch = min(max(offsets * _RECORD_BYTES, _MIN_FETCH), _MAX_FETCH)
    return {
        "max.partition.fetch.bytes": fetch,
        "fetch.max.bytes": _MAX_FETCH * _QUEUE_FETCHES,
        "queued.max.messages.kbytes": max(fetch * _QUEUE_FETCHES, _MIN_QUEUE) // 1024,
        "queued.min.messages": min(max(1, offsets), _QUEUE_MESSAGES),
        # A queue that small fills on a large run, and librdkafka then holds the next fetch
        # back for fetch.queue.backoff.ms (1 s by default): look again soon instead.
        "fetch.queue.backoff.ms": 10,
        "fetch.wait.max.ms": _FETCH_WAIT_MS,
    }


@contextmanager
def read_run(kafka: KafkaConnection, run_key: RunKey, timeout_s: float) -> Iterator[RunRead]:
    """Open a reader of the run key's messages (KafkaException and ConsumerError pass).

    The index is read by one consumer, the run's ranges by another, sized for them: the
    results read never waits behind the index read's last fetch.
    """
    planner = kafka.reader(_PLANNER)
    reader: Consumer | None = None
    try:
        topic = kafka.results_topic
        count = kafka.partition_count(topic, planner, timeout_s=timeout_s)
        partition = partition_for(run_key, count)
        low, high = watermark_offsets(planner, TopicPartition(topic, partition), timeout_s)
        if high <= low:
            yield RunRead(partition, high, iter(()), guided=True)
            return
        guide: tuple[Entry, list[tuple[int, int]]] | None = None
        try:
            guide = index_ranges(
                kafka, planner, run_key, partition, bounds=(low, high), timeout_s=timeout_s
            )
        except UnusableIndexError as exc:
            log.info("reading all of %s[%d] for %s: %s", topic, partition, run_key, exc)
        if guide is None:
            reader = kafka.reader(one_run_reader(high - low))
            messages = scan_ranges(reader, topic, partition, [(low, high)], timeout_s)
            yield RunRead(partition, high, messages, guided=False)
            return
        entry, ranges = guide
        reader = kafka.reader(one_run_reader(sum(end - start for start, end in ranges)))
        consumer = reader  # not Optional: the fallback below reads on with it

        def whole(why: str) -> Iterator[Message]:
            log.info("reading all of %s[%d] for %s: %s", topic, partition, run_key, why)
            return scan_ranges(consumer, topic, partition, [(low, high)], timeout_s)

        messages = scan_ranges(reader, topic, partition, ranges, timeout_s)
        prefix = run_key_prefix(run_key)
        yield RunRead(partition, high, guarded(messages, prefix, entry, ranges, whole), True)
    finally:
        planner.close()
        if reader is not None:
            reader.close()


def index_ranges(
    kafka: KafkaConnection,
    consumer: Consumer,
    run_key: RunKey,
    partition: int,
    *,
    bounds: tuple[int, int],
    timeout_s: float,
) -> tuple[Entry, list[tuple[int, int]]]:
    """The run's checked index entry and the offset ranges of the partition to read for it
    (UnusableIndexError: the index cannot say, read everything). `bounds`: the partition's
    low and high watermarks."""
    expected = results_log(kafka, timeout_s)
    low, high = bounds
    entries, through = index_partition(
        kafka, consumer, partition, timeout_s, expected=expected, high=high
    )
    value = entries.get(run_key_prefix(run_key))
    if value is None:
        raise UnusableIndexError("no run index entry")
    entry = checked_entry(value, expected, partition, high, through)
    return entry, _merged(entry.ranges(low, high))


def index_partition(
    kafka: KafkaConnection,
    consumer: Consumer,
    partition: int,
    timeout_s: float,
    *,
    expected: IndexedLog | None = None,
    high: int | None = None,
) -> tuple[dict[bytes, bytes], int]:
    """The raw entries of one index partition by run prefix, and its checked "indexed
    through" (UnusableIndexError: the index cannot say). `expected`: the results log read
    (asked if None); `high`: the results partition's high watermark (asked if None)."""
    topic = kafka.index_topic
    entries: dict[bytes, bytes] = {}
    marker: bytes | None = None
    if expected is None:
        expected = results_log(kafka, timeout_s)
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            raise UnusableIndexError(f"no run index topic {topic}")
        if partition >= len(metadata.partitions):
            count = len(metadata.partitions)
            raise UnusableIndexError(f"the run index {topic} has {count} partitions")
        if high is None:
            results = TopicPartition(kafka.results_topic, partition)
            high = watermark_offsets(consumer, results, timeout_s)[1]
        _, messages = scan(consumer, topic, [partition], timeout_s)
        for message in messages:
            key, value = message.key(), message.value()
            if key == MARKER_KEY:
                marker = value
            elif key is not None and value is None:
                entries.pop(key, None)
            elif key is not None and value is not None:
                entries[key] = value
    except KafkaException as exc:
        raise UnusableIndexError(f"cannot read the run index: {exc.args[0]}") from exc
    if marker is None:
        raise UnusableIndexError("no indexed-through offset in the run index")
    return entries, checked_marker(marker, expected, partition, high)


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted ranges with gaps under READ_GAP read through."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start - merged[-1][1] < READ_GAP:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
