"""Dead letters of the work topic: tasks that cannot be decoded or keep failing, with why."""

from __future__ import annotations

from confluent_kafka import KafkaError, Message

from resultlog.consumers.dlq import (
    HEADER_REASON,
    HEADER_REASON_KIND,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_TOPIC,
)
from resultlog.kafka import Headers, KafkaClientError, KafkaConnection, produce
from resultlog.producer.worker._plan import WorkError

__all__ = ["CHUNK_FAILED", "HEADER_ATTEMPTS", "WorkDeadLetters"]

HEADER_ATTEMPTS = "resultlog.attempts"
CHUNK_FAILED = "chunk_failed"
_FLUSH_S = 30.0
_MAX_REASON = 2000


class WorkDeadLetters:
    """Copies a task verbatim to the work dead-letter topic and waits for the acknowledgement.

    The task's offset is committed right after, so a dead letter that is not durable would
    lose the task: a failed one raises WorkError and the worker stops with the task uncommitted.
    """

    def __init__(self, kafka: KafkaConnection) -> None:
        self.topic = kafka.work_dlq_topic
        self._source = kafka.work_topic
        self._producer = kafka.durable_producer()

    def send(self, message: Message, *, reason: str, kind: str, attempts: int) -> None:
        """Dead-letter a consumed task as it is (key and value unchanged), with why."""
        where = f"{self._source}[{message.partition()}]@{message.offset()}"
        headers: Headers = [
            (HEADER_REASON, reason[:_MAX_REASON].encode("utf-8", "replace")),
            (HEADER_REASON_KIND, kind.encode("utf-8")),
            (HEADER_ATTEMPTS, str(attempts).encode("ascii")),
            (HEADER_SOURCE_TOPIC, self._source.encode("utf-8")),
            (HEADER_SOURCE_PARTITION, str(message.partition()).encode("ascii")),
            (HEADER_SOURCE_OFFSET, str(message.offset()).encode("ascii")),
        ]
        failures: list[str] = []

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                failures.append(error.str())

        try:
            produce(
                self._producer,
                self.topic,
                message.key(),
                message.value(),
                headers=headers,
                on_delivery=delivered,
            )
        except KafkaClientError as exc:
            raise WorkError(f"cannot dead-letter the task at {where}: {exc}") from exc
        left = self._producer.flush(_FLUSH_S)
        if failures or left:
            why = failures[0] if failures else "not acknowledged in time"
            raise WorkError(f"dead letter of the task at {where} to {self.topic} failed: {why}")
