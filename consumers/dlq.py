"""Dead letters: records a reader could not use, copied verbatim to the dead-letter topic.

The original key and value are produced unchanged (a tombstone stays a tombstone), with
headers naming the reason and where the record came from. Delivery is asynchronous (acks=all,
idempotent producer); a failed delivery is logged and counted, never raised, so a broken
dead-letter topic cannot stall the reader that found the poison.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from confluent_kafka import KafkaError, KafkaException, Message

from resultlog.consumers.errors import ConsumerError
from resultlog.kafka import Headers, KafkaClientError, KafkaConnection, produce
from resultlog.schemas import (
    DecodeError,
    KeyDecodeError,
    OutOfRangeError,
    UnknownFormatVersionError,
    UnknownSchemaError,
)

__all__ = [
    "HEADER_REASON",
    "HEADER_REASON_KIND",
    "HEADER_SOURCE_OFFSET",
    "HEADER_SOURCE_PARTITION",
    "HEADER_SOURCE_TOPIC",
    "REASON_KINDS",
    "DeadLetterWriter",
    "reason_kind",
]

log = logging.getLogger(__name__)

HEADER_REASON: Final = "resultlog.reason"
HEADER_REASON_KIND: Final = "resultlog.reason.kind"
HEADER_SOURCE_TOPIC: Final = "resultlog.source.topic"
HEADER_SOURCE_PARTITION: Final = "resultlog.source.partition"
HEADER_SOURCE_OFFSET: Final = "resultlog.source.offset"

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
        self._on_failure = on_failure
        self._producer = kafka.durable_producer()

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
    ) -> None:
        """Queue one dead letter; delivery failures are logged and reported, never raised."""
        headers: Headers = [
            (HEADER_REASON, reason[:_MAX_REASON].encode("utf-8", "replace")),
            (HEADER_SOURCE_TOPIC, source_topic.encode("utf-8")),
            (HEADER_SOURCE_PARTITION, str(source_partition).encode("ascii")),
            (HEADER_SOURCE_OFFSET, str(source_offset).encode("ascii")),
        ]
        if kind is not None:
            headers.append((HEADER_REASON_KIND, kind.encode("utf-8")))
        try:
            produce(
                self._producer, self.topic, key, value, headers=headers, on_delivery=self._delivered
            )
        except KafkaClientError as exc:
            self._failed(
                f"cannot queue dead letter for {source_topic}[{source_partition}]"
                f"@{source_offset}: {exc}"
            )

    def send_error(self, error: DecodeError, key: bytes | None, value: bytes | None) -> None:
        """Dead-letter the record a located DecodeError describes."""
        if error.topic is None or error.partition is None or error.offset is None:
            raise ValueError("the DecodeError must be located (topic, partition, offset)")
        self.send(
            key,
            value,
            reason=error.reason,
            source_topic=error.topic,
            source_partition=error.partition,
            source_offset=error.offset,
            kind=reason_kind(error),
        )

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
