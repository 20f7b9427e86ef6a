"""The aggregator's changelog topic: each store's flushes, acknowledged before the store
writes them, read back to restore a store on another machine (see `store._changelog`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from resultlog.consumers._scan import watermark_offsets
from resultlog.consumers.aggregator.store import (
    MARKER_KEY,
    ChangelogError,
    ChangelogRecord,
    Entries,
)
from resultlog.kafka import KafkaClientError, KafkaConnection, arrived, produce

__all__ = ["KafkaChangelog"]

log = logging.getLogger(__name__)
_ACK_TIMEOUT_S = 30.0
_READ_STALL_S = 30.0  # no record and no end of partition for this long: the read failed
_BATCH = 5000
# Gapless: a message that fails fails every later one, so the marker's delivery vouches for
# the entries before it (no callback per entry).
_PRODUCER = {"linger.ms": 2, "enable.gapless.guarantee": True}


class KafkaChangelog:
    """One aggregator's writer and reader of the changelog topic."""

    def __init__(self, kafka: KafkaConnection) -> None:
        self.topic = kafka.settings.changelog_topic
        self._kafka = kafka
        _, self.topic_id = kafka.topic_identity(self.topic)
        self._producer = kafka.durable_producer(_PRODUCER)
        self._watermarks = kafka.reader()

    def write(self, partition: int, entries: Entries, marker: bytes | None) -> int:
        """Write the entries, then the marker (None: its tombstone), acknowledged; the offset
        after the marker. Only the marker's delivery is heard: the producer is gapless, so a
        marker delivered means every entry before it was."""
        failed: list[KafkaError] = []
        marked: list[int] = []

        def delivered_marker(error: KafkaError | None, message: Message) -> None:
            if error is not None:
                failed.append(error)
            else:
                marked.append(message.offset() or 0)

        producer = self._producer
        try:
            for key, value in entries:
                produce(producer, self.topic, key, value, partition=partition)
            produce(
                producer, self.topic, MARKER_KEY, marker,
                partition=partition, on_delivery=delivered_marker,
            )  # fmt: skip
            producer.flush(_ACK_TIMEOUT_S)
        except KafkaClientError as exc:
            failed.append(KafkaError(KafkaError._FAIL, str(exc)))
        if failed or not marked:
            # A gapless producer that lost a message is done for: the next write gets another.
            self._producer = self._kafka.durable_producer(_PRODUCER)
            reason = failed[0].str() if failed else "no acknowledgement in time"
            raise ChangelogError(f"cannot write {self.topic}[{partition}]: {reason}")
        return marked[0] + 1

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
        if end <= start:
            return
        consumer = self._kafka.reader({"enable.partition.eof": True})
        try:
            consumer.assign([TopicPartition(self.topic, partition, start)])
            stalled_at = time.monotonic() + _READ_STALL_S
            while True:
                batch = arrived(consumer, _BATCH, 0.5)  # consume() would wait to fill it
                if not batch and time.monotonic() > stalled_at:
                    raise ChangelogError(f"{self.topic}[{partition}] stopped answering")
                for message in batch:
                    error = message.error()
                    offset = message.offset() or 0
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            raise ChangelogError(f"reading {self.topic}: {error.str()}")
                        if offset >= end:
                            return
                        continue
                    if offset >= end:
                        return
                    yield ChangelogRecord(offset, message.key() or b"", message.value())
                    if offset + 1 >= end:
                        return
                if batch:
                    stalled_at = time.monotonic() + _READ_STALL_S
        finally:
            consumer.close()

    def clear(self, partition: int, end: int) -> None:
        """Tombstone every key of the partition's records below `end` (a refused changelog's:
        a compacted topic refuses to delete records)."""
        low, _ = self.bounds(partition)
        keys = {record.key for record in self.read(partition, low, end)}
        self.write(partition, [(key, None) for key in sorted(keys - {MARKER_KEY})], None)
        log.info("cleared %s[%d]: %d keys tombstoned", self.topic, partition, len(keys))

    def close(self) -> None:
        """Wait for what is queued, then release the clients."""
        self._producer.flush(_ACK_TIMEOUT_S)
        self._watermarks.close()
