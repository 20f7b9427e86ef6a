"""The summaries topic's value of a run whose partition this instance does not hold fresh.

During a hand-over a run's partition may be held fresh by no instance for a while (revoked
here, not yet assigned there, or restoring): a run that exists must then be served, marked
stale, from what the summaries topic holds, never answered 404. A partition asked for is read
to its end on the request's thread and kept (latest value per run key) while it is asked for;
one not asked for a minute is let go, so memory holds only the partitions asked for lately.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Message, TopicPartition

from resultlog.consumers._scan import watermark_offsets
from resultlog.consumers.errors import ConsumerError
from resultlog.kafka import KafkaConnection
from resultlog.schemas import (
    Codec,
    DecodeError,
    Location,
    RunKey,
    RunSummary,
    encode_run_key,
    partition_for,
)

__all__ = ["PublishedSummaries"]

log = logging.getLogger(__name__)

_READ_S = 5.0  # a request waits at most this long for a partition to be read to its end
_IDLE_S = 60.0  # a partition not asked for this long is let go
_BATCH = 500


class PublishedSummaries:
    """The summaries topic's latest value of each run, read on demand per partition."""

    def __init__(self, kafka: KafkaConnection, idle_s: float = _IDLE_S) -> None:
        self.topic = kafka.summaries_topic
        self._kafka = kafka
        self._codec: Codec = kafka.codec
        self._idle_s = idle_s
        self._lock = threading.Lock()  # one request reads at a time; the others then find it
        self._consumer: Consumer | None = None
        self._partitions: int | None = None
        self._values: dict[int, dict[bytes, bytes | None]] = {}  # partition -> key -> value
        self._asked: dict[int, float] = {}  # partition -> when it was last asked for

    def summary(self, run_key: RunKey) -> RunSummary | None:
        """The run's summary on the summaries topic now (None: none, or a tombstone);
        ConsumerError when its partition cannot be read to its end in time."""
        with self._lock:
            partition = partition_for(run_key, self._partition_count())
            values = self._read(partition)
            value = values.get(encode_run_key(run_key))
            self._let_go(skip=partition)
        if value is None:
            return None
        try:
            return self._codec.decode_run_summary(value, at=Location(self.topic, partition))
        except DecodeError:
            return None  # not a summary anyone can serve

    def close(self) -> None:
        """Release the reader."""
        with self._lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None
            self._values.clear()

    def _read(self, partition: int) -> dict[bytes, bytes | None]:
        """The partition's latest values, read up to its end as of now."""
        consumer = self._reader()
        tp = TopicPartition(self.topic, partition)
        deadline = time.monotonic() + _READ_S
        try:
            if partition not in self._values:
                consumer.incremental_assign(
                    [TopicPartition(self.topic, partition, OFFSET_BEGINNING)]
                )
                self._values[partition] = {}
            self._asked[partition] = time.monotonic()
            low, high = watermark_offsets(consumer, tp, _READ_S)
            while high > max(low, 0) and _position(consumer, tp) < high:
                if time.monotonic() > deadline:
                    raise ConsumerError(f"cannot read {self.topic} [{partition}] to its end")
                self._take(consumer.consume(_BATCH, timeout=0.05))
        except KafkaException as exc:
            raise ConsumerError(f"cannot read {self.topic} [{partition}]: {exc}") from exc
        return self._values[partition]

    def _take(self, messages: list[Message]) -> None:
        for message in messages:
            partition, key = message.partition(), message.key()
            values = self._values.get(partition if partition is not None else -1)
            if message.error() is None and values is not None and key is not None:
                values[key] = message.value()

    def _let_go(self, skip: int) -> None:
        """Unassign and forget the partitions no one asked for lately."""
        now = time.monotonic()
        idle = [p for p, at in self._asked.items() if p != skip and now - at > self._idle_s]
        if not idle or self._consumer is None:
            return
        self._consumer.incremental_unassign([TopicPartition(self.topic, p) for p in idle])
        for partition in idle:
            del self._asked[partition]
            del self._values[partition]

    def _partition_count(self) -> int:
        """How many partitions the topic has (asked once: the aggregator checks its layout).

        Asked through the reader, which then knows the topic: one that does not answers a
        watermark query with "unknown partition"."""
        if self._partitions is None:
            try:
                found = (
                    self._reader().list_topics(self.topic, timeout=_READ_S).topics.get(self.topic)
                )
            except KafkaException as exc:
                raise ConsumerError(f"cannot read the metadata of {self.topic}: {exc}") from exc
            if found is None or found.error is not None or not found.partitions:
                raise ConsumerError(f"cannot read the partitions of {self.topic}")
            self._partitions = len(found.partitions)
        return self._partitions

    def _reader(self) -> Consumer:
        if self._consumer is None:
            self._consumer = self._kafka.reader()
        return self._consumer


def _position(consumer: Consumer, tp: TopicPartition) -> int:
    """The next offset the consumer will return of the partition (-1: none read yet)."""
    (at,) = consumer.position([tp])
    return int(at.offset) if at.offset >= 0 else -1
