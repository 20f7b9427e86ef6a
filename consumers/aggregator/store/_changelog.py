"""The aggregator's changelog topic: each store's flushes, acknowledged before the store
writes them, and the one reader of it that restores a store (the active's and the standby's
alike; see `_records`).

A writer that takes a partition first writes a fence naming its tag, and every value it
writes ends with that tag. Writes of the partition's previous writer can still arrive after
the fence (queued in its producer when its partition moved on: a paused process, a broker
away); a restore knows them by their tag, and refuses what they left standing (`_restore`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer, TopicPartition

from resultlog.consumers._scan import scan_ranges, watermark_offsets
from resultlog.consumers.aggregator._kafka import delete_retention_ms
from resultlog.consumers.aggregator.store._codec import FENCE, TAG_SIZE, changelog_messages
from resultlog.consumers.aggregator.store._codec import META as MARKER_KEY
from resultlog.consumers.aggregator.store._records import ChangelogError, ChangelogRecord, Entries
from resultlog.consumers.errors import ConsumerError
from resultlog.kafka import KafkaClientError, KafkaConnection, produce

__all__ = ["KafkaChangelog"]

log = logging.getLogger(__name__)
_ACK_TIMEOUT_S = 30.0
_ACK_POLL_S = 0.05
_READ_STALL_S = 30.0  # no record for this long: the read failed
_BATCH = 20_000  # records per list of `entries`: a restore writes each in one batch
_QUEUE_CHUNK = 10_000  # entries queued per produce_batch call, within the local queue's room
_QUEUE_WAIT_S = 30.0  # the local queue stays full this long: the write failed
# Gapless: a message that fails fails every later one, so the marker's delivery vouches for
# the entries before it (no callback per entry).
_PRODUCER = {"linger.ms": 2, "enable.gapless.guarantee": True}


class _Sending:
    """One flush's records queued on the changelog producer, until its marker is heard."""

    def __init__(self, changelog: KafkaChangelog, partition: int) -> None:
        self._changelog = changelog
        self._partition = partition
        self.producer: Producer | None = None
        self._offset: int | None = None
        self._error: str | None = None

    def delivered(self, error: KafkaError | None, message: Message) -> None:
        """The marker's delivery report."""
        if error is not None:
            self.failed(error.str())
        else:
            self._offset = (message.offset() or 0) + 1

    def failed(self, reason: str) -> None:
        """It cannot be acknowledged."""
        self._error = self._error or reason

    def done(self) -> bool:
        """Whether the marker was heard of (serves the producer's delivery reports)."""
        if self._unheard() and self.producer is not None:
            self.producer.poll(0)
        return not self._unheard()

    def _unheard(self) -> bool:
        return self._offset is None and self._error is None

    def wait(self) -> int:
        """The offset after the marker, once acknowledged; ChangelogError if it was not."""
        # Not flush(): that waits for every partition's flushes queued since, too.
        deadline = time.monotonic() + _ACK_TIMEOUT_S
        producer = self.producer
        while self._unheard() and producer is not None and time.monotonic() < deadline:
            producer.poll(_ACK_POLL_S)  # returns as soon as any delivery report is served
        if self._offset is None:
            if self.producer is not None:
                self._changelog._lost(self.producer)
            reason = self._error or "no acknowledgement in time"
            topic = self._changelog.topic
            raise ChangelogError(f"cannot write {topic}[{self._partition}]: {reason}")
        return self._offset


class KafkaChangelog:
    """One aggregator's writer and reader of the changelog topic."""

    def __init__(self, kafka: KafkaConnection) -> None:
        self.topic = kafka.settings.changelog_topic
        self._kafka = kafka
        self.topic_id = ""
        self.delete_retention_ms = 0  # how long the topic keeps tombstones
        self._tags: dict[int, bytes] = {}  # each partition's tag, once fenced
        self.identify()
        self._producer: Producer | None = None  # made at the first write: readers need none
        self._watermarks = kafka.reader()

    def identify(self) -> str:
        """Ask the broker again which topic the changelog is (it may have been deleted and
        re-created: every store's next flush then writes its state whole, after a new fence)
        and how long it keeps tombstones; its topic ID (KafkaClientError if the broker does
        not say)."""
        _, topic_id = self._kafka.topic_identity(self.topic)
        self.moved_to(topic_id)
        self.delete_retention_ms = delete_retention_ms(self._kafka, self.topic)
        return self.topic_id

    def moved_to(self, topic_id: str) -> None:
        """The changelog is the topic of this ID now: its writes begin with new fences."""
        if topic_id != self.topic_id:
            self.topic_id = topic_id
            self._tags.clear()

    def fence(self, partition: int) -> int:
        """Begin this writer's records of the partition with a fence of a new tag,
        acknowledged; the offset after it (ChangelogError if it cannot be written)."""
        tag = os.urandom(TAG_SIZE)
        self._tags[partition] = tag
        try:
            return self.send(partition, [(FENCE + tag, b"")], None, with_marker=False).wait()
        except ChangelogError:
            self._tags.pop(partition, None)  # no write may carry a tag whose fence is not there
            raise

    def writer(self, partition: int) -> bytes:
        """The tag of this writer's records of the partition (fenced at the first write)."""
        tag = self._tags.get(partition)
        if tag is None:
            self.fence(partition)
            tag = self._tags[partition]
        return tag

    def send(
        self, partition: int, entries: Entries, marker: bytes | None, *, with_marker: bool = True
    ) -> _Sending:
        """Queue the entries, then the marker (None: its tombstone), tagged; only the last
        record's delivery is heard: the producer is gapless, so a marker delivered means
        every entry before it was (`with_marker` False: the last entry is heard instead)."""
        sending = _Sending(self, partition)
        if self._producer is None:
            self._producer = self._kafka.durable_producer(_PRODUCER)
        producer = self._producer
        records = [*entries, (MARKER_KEY, marker)] if with_marker else entries
        try:
            tag = self.writer(partition)
            _produce_all(producer, self.topic, partition, records[:-1], tag)
            key, value = records[-1]
            produce(
                producer, self.topic, key, None if value is None else value + tag,
                partition=partition, on_delivery=sending.delivered,
            )  # fmt: skip
        except KafkaClientError as exc:
            sending.failed(str(exc))
        sending.producer = producer
        return sending

    def write(self, partition: int, entries: Entries, marker: bytes | None) -> int:
        """Write the entries, then the marker, acknowledged; the offset after the marker."""
        return self.send(partition, entries, marker).wait()

    def _lost(self, producer: Producer) -> None:
        """A gapless producer that lost a message is done for: the next write gets another."""
        if producer is self._producer:
            self._producer = None

    def bounds(self, partition: int) -> tuple[int, int]:
        """The partition's low and high watermarks."""
        try:
            return watermark_offsets(
                self._watermarks, TopicPartition(self.topic, partition), _READ_STALL_S
            )
        except KafkaException as exc:
            raise ChangelogError(f"no watermarks for {self.topic}[{partition}]: {exc}") from exc

    def read(self, partition: int, start: int, end: int) -> Iterator[ChangelogRecord]:
        """Every record of offsets [start, end) of a partition, in order."""
        for message in self._messages(partition, start, end):
            yield ChangelogRecord(message.offset() or 0, message.key() or b"", message.value())

    def entries(
        self, partition: int, start: int, end: int, size: int = _BATCH
    ) -> Iterator[tuple[int, Entries]]:
        """The (key, value) of every record of offsets [start, end) of a partition, in order,
        in lists of `size`, each with the offset after its last record (a restore's read: no
        object per record but the pair)."""
        batch: Entries = []
        append = batch.append
        for message in self._messages(partition, start, end):
            append((message.key() or b"", message.value()))
            if len(batch) >= size:
                yield (message.offset() or 0) + 1, batch
                batch = []
                append = batch.append
        if batch:
            yield end, batch

    def _messages(self, partition: int, start: int, end: int) -> Iterator[Message]:
        """The messages of offsets [start, end) of a partition, `end` at most its high
        watermark; ChangelogError if the read fails or stalls."""
        if end <= start:
            return
        consumer = self._kafka.reader()
        try:
            yield from scan_ranges(consumer, self.topic, partition, [(start, end)], _READ_STALL_S)
        except (ConsumerError, KafkaException) as exc:
            raise ChangelogError(f"reading {self.topic}[{partition}]: {exc}") from exc
        finally:
            consumer.close()

    def clear(self, partition: int, end: int) -> None:
        """Tombstone every key of the partition's records below `end` (a refused changelog's:
        a compacted topic refuses to delete records), this writer's fence aside."""
        low, _ = self.bounds(partition)
        keys = {record.key for record in self.read(partition, low, end)}
        keys -= {MARKER_KEY, FENCE + self.writer(partition)}
        self.write(partition, [(key, None) for key in sorted(keys)], None)
        log.info("cleared %s[%d]: %d keys tombstoned", self.topic, partition, len(keys))

    def close(self) -> None:
        """Wait for what is queued, then release the clients."""
        if self._producer is not None:
            self._producer.flush(_ACK_TIMEOUT_S)
        self._watermarks.close()


def _produce_all(
    producer: Producer, topic: str, partition: int, entries: Entries, tag: bytes
) -> None:
    """Queue every entry in order, tagged, in batches: one produce() call per entry cost a
    flush several microseconds a key on the consumer thread."""
    deadline = time.monotonic() + _QUEUE_WAIT_S
    for start in range(0, len(entries), _QUEUE_CHUNK):
        batch = changelog_messages(entries[start : start + _QUEUE_CHUNK], tag)
        while batch:
            try:
                queued = producer.produce_batch(topic, batch, partition=partition)
            except KafkaException as exc:
                raise KafkaClientError(f"cannot queue for {topic}: {exc}") from exc
            batch = [] if queued == len(batch) else _unqueued(topic, batch)
            if batch:
                if time.monotonic() > deadline:
                    raise KafkaClientError(f"the local queue for {topic} stayed full")
                producer.poll(0.05)


def _unqueued(topic: str, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tail of a batch the full local queue refused, to queue again in order; any other
    refusal, or a gap (a later entry queued past a refused one), fails the write."""
    refused = [i for i, message in enumerate(batch) if "_error" in message]
    if not refused:
        return []
    error = batch[refused[0]]["_error"]
    if refused != list(range(refused[0], len(batch))) or error.code() != KafkaError._QUEUE_FULL:
        raise KafkaClientError(f"cannot queue for {topic}: {error}")
    for message in batch[refused[0] :]:
        del message["_error"]
    return batch[refused[0] :]
