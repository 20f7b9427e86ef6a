"""The aggregator's run index: where each run key's records lie, published to the index topic.

Per assigned partition: each run prefix's offset intervals, and how far they are complete.
Entries of changed runs are produced to the index partition numbered like the results
partition; once every one of them is acknowledged, the partition's "indexed through" (the
read position when they were taken) follows them, so a reader that sees a marker sees every
entry written before it. On assignment the intervals are restored from the index topic, and
the records between its "indexed through" and where the aggregator starts reading (none,
unless the index lags the restored store or was lost) are read for their keys alone.

Only the consumer thread uses this object. Readers never depend on it (`_run_read`): a
missing topic or a failed write costs them a full read, never a wrong answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException, Message

from resultlog.consumers._index_codec import (
    MARKER_KEY,
    IndexedLog,
    IndexRecordError,
    Intervals,
    decode,
    encode_intervals,
    encode_marker,
    run_prefix,
)
from resultlog.consumers._scan import scan, scan_ranges
from resultlog.consumers.errors import ConsumerError
from resultlog.kafka import KafkaClientError, KafkaConnection, produce

__all__ = ["RunIndexWriter"]

_Delivered = Callable[[KafkaError | None, Message], None]

log = logging.getLogger(__name__)
_INTERVAL_S = 1.0  # how often changed entries (and then markers) are produced
_CHECK_S = 5.0  # how often a missing or mismatched index topic is looked for again
_READ_TIMEOUT_S = 30.0
_FLUSH_S = 10.0


@dataclass
class _Batch:
    """Entries produced for one partition, waiting for their acknowledgements."""

    through: int
    prefixes: set[bytes]
    outstanding: int
    failed: bool = False


@dataclass
class _Partition:
    """One assigned partition's intervals, what changed, and what was last published."""

    complete: bool  # the intervals hold every record below the read position
    runs: dict[bytes, Intervals] = field(default_factory=dict)
    dirty: set[bytes] = field(default_factory=set)
    foreign: set[bytes] = field(default_factory=set)  # another log's entries: tombstoned
    batch: _Batch | None = None
    marked: int = -1  # the last "indexed through" produced


class RunIndexWriter:
    """The intervals of the assigned partitions' runs, and their publication."""

    def __init__(self, kafka: KafkaConnection, partitions: int) -> None:
        self._kafka = kafka
        self._topic = kafka.index_topic
        self._results_topic = kafka.results_topic
        self._count = partitions
        self._parts: dict[int, _Partition] = {}
        self._producer = kafka.durable_producer()
        self._usable = False
        self._next_check = 0.0
        self._next_publish = 0.0
        self._warned = False
        self._log: IndexedLog | None = None  # unknown: nothing published
        self._check_topic()

    def identify(self, log_id: IndexedLog | None) -> None:
        """The exact results log read now (None: unknown); entries of another are not used."""
        self._log = log_id

    def forget(self) -> None:
        """Drop every partition, publishing nothing (the results topic was re-created)."""
        self._parts.clear()

    def assign(self, partition: int, low: int, start: int) -> None:
        """Take a partition the aggregator reads from `start`: restore its intervals and
        complete them below `start` (low: the partition's low watermark). Without a usable
        index topic nothing is read and nothing will be published for it."""
        state = self._parts[partition] = _Partition(complete=self._usable or start <= low)
        if not self._usable:
            return
        covered = self._restore(partition, state, low)
        if start <= low:
            state.runs, state.marked = {}, -1  # nothing below `start` is in the log now
            return
        if start > covered:
            self._backfill(partition, state, covered, start)
            state.dirty = set(state.runs)

    def revoke(self, partition: int, position: int | None) -> None:
        """Forget a partition, publishing what changed first if `position` is given."""
        state = self._parts.get(partition)
        if state is not None and position is not None and self._usable:
            self._publish_now(partition, state, position)
        self._parts.pop(partition, None)

    def note(self, partition: int, offset: int, key: bytes | None) -> None:
        """A record (or tombstone) of the partition was applied at `offset`."""
        self.note_all(partition, key, offset, offset)

    def note_all(self, partition: int, key: bytes | None, first: int, last: int) -> None:
        """Records of one run key (`key` is one of theirs) were applied from `first` to `last`
        (the offsets between are theirs or too few to matter: intervals merge such gaps)."""
        prefix = run_prefix(key)
        state = self._parts.get(partition)
        if prefix is None or state is None:
            return
        intervals = state.runs.get(prefix)
        if intervals is None:
            intervals = state.runs[prefix] = Intervals()
        if first == last:
            intervals.add(first)
        else:
            intervals.cover(first, last + 1)
        state.dirty.add(prefix)

    def tick(self, positions: dict[int, int]) -> None:
        """Produce markers for acknowledged entries, then changed entries (every second)."""
        self._producer.poll(0)
        now = time.monotonic()
        if not self._usable:
            if now >= self._next_check:
                self._check_topic()
            return
        for partition, state in self._parts.items():
            self._settle(partition, state)
        if now < self._next_publish:
            return
        self._next_publish = now + _INTERVAL_S
        for partition, state in self._parts.items():
            position = positions.get(partition)
            if position is not None and state.batch is None and state.complete:
                self._start_batch(partition, state, position)

    def close(self) -> None:
        """Deliver what is queued."""
        self._producer.flush(_FLUSH_S)

    def _start_batch(self, partition: int, state: _Partition, position: int) -> None:
        if self._log is None:
            return
        state.dirty |= state.foreign - set(state.runs)
        state.foreign = set()
        if not state.dirty:
            if position > state.marked:
                self._mark(partition, state, position)
            return
        batch = _Batch(position, state.dirty, len(state.dirty))
        state.dirty, state.batch = set(), batch

        def delivered(error: KafkaError | None, _message: Message) -> None:
            batch.outstanding -= 1
            if error is not None:
                batch.failed = True
                self._usable = False  # looked for again in a few seconds
                self._warn(f"writing the run index failed: {error.str()}")

        for prefix in batch.prefixes:
            intervals = state.runs.get(prefix)
            value = None if intervals is None else encode_intervals(self._log, partition, intervals)
            self._produce(partition, prefix, value, delivered)

    def _settle(self, partition: int, state: _Partition) -> None:
        """After a batch's acknowledgements: its marker, or its entries again."""
        batch = state.batch
        if batch is None or batch.outstanding > 0:
            return
        state.batch = None
        if batch.failed:
            state.dirty |= batch.prefixes
            return
        self._mark(partition, state, batch.through)

    def _mark(self, partition: int, state: _Partition, through: int) -> None:
        if self._log is not None:
            self._produce(partition, MARKER_KEY, encode_marker(self._log, partition, through))
            state.marked = through

    def _publish_now(self, partition: int, state: _Partition, position: int) -> None:
        """Entries then marker, waiting for each (a revocation: the next owner reads them)."""
        if not state.complete:
            return
        if state.batch is not None:
            state.dirty |= state.batch.prefixes
            state.batch = None
        self._start_batch(partition, state, position)
        self._producer.flush(_FLUSH_S)
        if state.batch is not None:
            self._settle(partition, state)
            self._producer.flush(_FLUSH_S)

    def _produce(
        self, partition: int, key: bytes, value: bytes | None, on_delivery: _Delivered | None = None
    ) -> None:
        try:
            produce(
                self._producer, self._topic, key, value, partition=partition,
                on_delivery=on_delivery,
            )  # fmt: skip
        except KafkaClientError as exc:
            self._usable = False
            self._warn(f"cannot queue a run index record: {exc}")

    def _restore(self, partition: int, state: _Partition, low: int) -> int:
        """Read the partition's entries back; return the offset they are complete below.
        Entries of another log (a topic deleted since) are to be tombstoned; if the marker is
        one of them, the whole index of the partition is rewritten from `low`."""
        runs: dict[bytes, Intervals] = {}
        through: int | None = None
        consumer = self._kafka.reader()
        try:
            _, messages = scan(consumer, self._topic, [partition], _READ_TIMEOUT_S)
            for message in messages:
                key, value = message.key(), message.value()
                if key is None:
                    continue
                runs.pop(key, None)
                state.foreign.discard(key)
                if value is None:
                    continue
                record = decode(value)
                if (record.log, record.partition) != (self._log, partition):
                    state.foreign.add(key)
                elif key == MARKER_KEY:
                    through = record.through
                elif record.intervals is not None:
                    runs[key] = record.intervals
        except (IndexRecordError, KafkaException, ConsumerError) as exc:
            log.info("rebuilding the run index of partition %d: %s", partition, exc)
            return low
        finally:
            consumer.close()
        state.foreign.discard(MARKER_KEY)  # the next marker replaces it
        if through is None:
            if state.foreign:
                log.info("rewriting the run index of partition %d: of another log", partition)
            state.foreign |= set(runs)
            return low
        state.runs = runs
        state.marked = through
        return through

    def _backfill(self, partition: int, state: _Partition, start: int, end: int) -> None:
        """Index the records in [start, end) by their keys (values unread)."""
        log.info(
            "indexing offsets %d to %d of %s[%d] for the run index",
            start, end, self._results_topic, partition,
        )  # fmt: skip
        consumer = self._kafka.reader()
        try:
            for message in scan_ranges(
                consumer, self._results_topic, partition, [(start, end)], _READ_TIMEOUT_S
            ):
                self.note(partition, message.offset() or 0, message.key())
        finally:
            consumer.close()

    def _check_topic(self) -> None:
        """Use the index topic only if it exists with one partition per results partition.

        Asked through a consumer: a producer's metadata request may auto-create the topic."""
        self._next_check = time.monotonic() + _CHECK_S
        consumer = self._kafka.reader()
        try:
            found = consumer.list_topics(self._topic, timeout=5.0).topics.get(self._topic)
        except KafkaException as exc:
            log.debug("no metadata of %s: %s", self._topic, exc)
            found = None
        finally:
            consumer.close()
        count = 0 if found is None or found.error is not None else len(found.partitions)
        problem = f"it has {count} partitions, not {self._count}"
        if count == 0:
            problem = "it does not exist (`resultlog topics create` creates it)"
        usable = count == self._count
        if not usable:
            self._warn(f"not writing the run index {self._topic}: {problem}")
        elif not self._usable and self._warned:
            log.info("writing the run index %s again", self._topic)
            self._warned = False
            for state in self._parts.values():  # it may have lost entries meanwhile
                state.dirty = set(state.runs)
        self._usable = usable

    def _warn(self, text: str) -> None:
        if not self._warned:
            log.warning("%s", text)
        self._warned = True
