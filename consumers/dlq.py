"""Dead letters: records a reader could not use, copied verbatim to the dead-letter topic.

The original key and value are produced unchanged (a tombstone stays a tombstone), with
headers naming the reason and where the record came from. Delivery is asynchronous (acks=all,
idempotent producer); a failed delivery is logged and counted, never raised, so a broken
dead-letter topic cannot stall the reader that found the poison.

The producer accepts what the dead-letter topic accepts (its max.message.bytes, not
librdkafka's 1 MB default); a record larger than that is dead-lettered without its value,
with a header giving the value's size. A source position already on the dead-letter topic is
not sent again: the writer reads the positions there the first time it meets poison, so a
reader rebuilding from the start of the log does not copy the same records twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

from confluent_kafka import KafkaError, KafkaException, Message

from resultlog.consumers._scan import TRANSIENT, scan
from resultlog.consumers.errors import ConsumerError
from resultlog.errors import TopicError
from resultlog.kafka import Headers, KafkaClientError, KafkaConnection, produce
from resultlog.schemas import (
    DecodeError,
    KeyDecodeError,
    OutOfRangeError,
    UnknownFormatVersionError,
    UnknownSchemaError,
)
from resultlog.topics import topic_config

__all__ = [
    "HEADER_REASON",
    "HEADER_REASON_KIND",
    "HEADER_SOURCE_OFFSET",
    "HEADER_SOURCE_PARTITION",
    "HEADER_SOURCE_TOPIC",
    "HEADER_VALUE_OMITTED",
    "REASON_KINDS",
    "DeadLetterWriter",
    "dead_letter_source",
    "reason_kind",
]

log = logging.getLogger(__name__)

HEADER_REASON: Final = "resultlog.reason"
HEADER_REASON_KIND: Final = "resultlog.reason.kind"
HEADER_SOURCE_TOPIC: Final = "resultlog.source.topic"
HEADER_SOURCE_PARTITION: Final = "resultlog.source.partition"
HEADER_SOURCE_OFFSET: Final = "resultlog.source.offset"
# Set (to the value's size in bytes) when the value was too large for the dead-letter topic.
HEADER_VALUE_OMITTED: Final = "resultlog.value.omitted"

BAD_KEY: Final = "bad_key"
EMPTY_VALUE: Final = "empty_value"
UNKNOWN_SCHEMA: Final = "unknown_schema"
UNKNOWN_FORMAT_VERSION: Final = "unknown_format_version"
UNDECODABLE_VALUE: Final = "undecodable_value"
MISROUTED: Final = "misrouted"
OUT_OF_RANGE: Final = "out_of_range"
REASON_KINDS: Final = (
    BAD_KEY,
    EMPTY_VALUE,
    UNKNOWN_SCHEMA,
    UNKNOWN_FORMAT_VERSION,
    UNDECODABLE_VALUE,
    MISROUTED,
    OUT_OF_RANGE,
)
_MAX_REASON = 2000  # a pydantic report can be long; the header only needs its start
# Room for the record batch's own framing around one message.
_BATCH_ROOM = 1024
_LIBRDKAFKA_MAX_MESSAGE = 1_000_000_000
_SCAN_TIMEOUT_S = 30.0
_Position = tuple[str, int, int]  # source topic, partition, offset


def reason_kind(error: DecodeError) -> str:
    """The coarse kind of a decode failure, one of REASON_KINDS (a metric label)."""
    if isinstance(error, KeyDecodeError):
        return BAD_KEY
    if isinstance(error, UnknownFormatVersionError):
        return UNKNOWN_FORMAT_VERSION
    if isinstance(error, UnknownSchemaError):
        return UNKNOWN_SCHEMA
    if isinstance(error, OutOfRangeError):
        return OUT_OF_RANGE
    if not error.raw:
        return EMPTY_VALUE
    return UNDECODABLE_VALUE


class DeadLetterWriter:
    """Copies unusable records to the dead-letter topic with reason and source headers."""

    def __init__(
        self, kafka: KafkaConnection, *, on_failure: Callable[[str], None] | None = None
    ) -> None:
        self.topic = kafka.dlq_topic
        self._kafka = kafka
        self._on_failure = on_failure
        self.limit = _topic_limit(kafka, self.topic)
        self._producer = kafka.durable_producer({"message.max.bytes": self.limit})
        self._sent: set[_Position] | None = None  # read from the topic when poison first comes

    def send(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        reason: str,
        source_topic: str,
        source_partition: int,
        source_offset: int,
        kind: str | None = None,
    ) -> bool:
        """Queue one dead letter; delivery failures are logged and reported, never raised.

        A source position already dead-lettered is skipped: then it returns False.
        """
        position = (source_topic, source_partition, source_offset)
        if self._sent is None:
            self._sent = _dead_lettered(self._kafka, self.topic)
        if position in self._sent:
            log.info("%s[%d]@%d is dead-lettered already", *position)
            return False
        self._sent.add(position)
        headers: Headers = [
            (HEADER_REASON, reason[:_MAX_REASON].encode("utf-8", "replace")),
            (HEADER_SOURCE_TOPIC, source_topic.encode("utf-8")),
            (HEADER_SOURCE_PARTITION, str(source_partition).encode("ascii")),
            (HEADER_SOURCE_OFFSET, str(source_offset).encode("ascii")),
        ]
        if kind is not None:
            headers.append((HEADER_REASON_KIND, kind.encode("utf-8")))
        size = len(key or b"") + len(value or b"") + sum(len(n) + len(v or "") for n, v in headers)
        if value is not None and size + _BATCH_ROOM > self.limit:
            headers.append((HEADER_VALUE_OMITTED, str(len(value)).encode("ascii")))
            value = None
        try:
            produce(
                self._producer, self.topic, key, value, headers=headers, on_delivery=self._delivered
            )
        except KafkaClientError as exc:
            self._failed(
                f"cannot queue dead letter for {source_topic}[{source_partition}]"
                f"@{source_offset}: {exc}"
            )
        return True

    def poll(self) -> None:
        """Serve delivery reports without waiting."""
        self._producer.poll(0)

    def flush(self, timeout_s: float = 10.0) -> int:
        """Wait for queued dead letters; return how many are still undelivered."""
        try:
            remaining: int = self._producer.flush(timeout_s)
        except KafkaException as exc:
            raise ConsumerError(f"cannot flush dead letters to {self.topic}: {exc}") from exc
        if remaining:
            self._failed(f"{remaining} dead letter(s) to {self.topic} not acknowledged in time")
        return remaining

    def _delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is not None:
            self._failed(f"dead letter to {self.topic} failed: {error.str()}")

    def _failed(self, reason: str) -> None:
        log.error("%s", reason)
        if self._on_failure is not None:
            self._on_failure(reason)


def _topic_limit(kafka: KafkaConnection, topic: str) -> int:
    """The topic's max.message.bytes; the limit topics are created with when unreadable."""
    try:
        limit = int(topic_config(kafka, topic)["max.message.bytes"])
    except (TopicError, KeyError, ValueError) as exc:
        # Never guess a smaller limit than the topic's: the broker refuses what is too large.
        log.info("cannot read max.message.bytes of %s: %s", topic, exc)
        limit = kafka.settings.max_message_bytes
    return min(limit, _LIBRDKAFKA_MAX_MESSAGE)


def _dead_lettered(kafka: KafkaConnection, topic: str) -> set[_Position]:
    """The source positions the dead-letter topic holds (empty when it cannot be read)."""
    deadline = time.monotonic() + _SCAN_TIMEOUT_S
    while True:
        try:
            return _read_positions(kafka, topic)
        except KafkaException as exc:
            error = exc.args[0]
            # A partition moving (a new topic, a leader election) is worth waiting out.
            transient = isinstance(error, KafkaError) and error.code() in TRANSIENT
            if not transient or time.monotonic() > deadline:
                log.warning("cannot read %s, dead letters may repeat: %s", topic, exc)
                return set()
            time.sleep(0.2)
        except (KafkaClientError, ConsumerError) as exc:
            log.warning("cannot read %s, dead letters may repeat: %s", topic, exc)
            return set()


def _read_positions(kafka: KafkaConnection, topic: str) -> set[_Position]:
    found: set[_Position] = set()
    consumer = kafka.reader()
    try:
        partitions = range(kafka.partition_count(topic, consumer, timeout_s=_SCAN_TIMEOUT_S))
        _, messages = scan(consumer, topic, partitions, _SCAN_TIMEOUT_S)
        for message in messages:
            headers = message.headers()
            position = dead_letter_source(headers) if isinstance(headers, list) else None
            if position is not None:
                found.add(position)
    finally:
        consumer.close()
    return found


def dead_letter_source(headers: Headers) -> tuple[str, int, int] | None:
    """The source position named by a dead letter's headers."""
    named = {name: value for name, value in headers if isinstance(value, bytes)}
    try:
        return (
            named[HEADER_SOURCE_TOPIC].decode("utf-8"),
            int(named[HEADER_SOURCE_PARTITION]),
            int(named[HEADER_SOURCE_OFFSET]),
        )
    except (KeyError, ValueError):
        return None
