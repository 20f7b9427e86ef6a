"""Publish run summaries to the compacted summaries topic, keyed and placed by run key."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from confluent_kafka import KafkaError, KafkaException, Message

from resultlog.consumers._scan import scan
from resultlog.consumers.errors import ConsumerError
from resultlog.kafka import KafkaClientError, KafkaConnection, access_denied, produce
from resultlog.schemas import (
    Codec,
    DecodeError,
    Location,
    RegistryError,
    RunKey,
    RunSummary,
    encode_run_key,
    partition_for,
)

__all__ = ["SummaryPublisher", "latest_summaries"]

log = logging.getLogger(__name__)


class SummaryPublisher:
    """The one writer of the summaries topic: a durable producer; failed runs are handed back.

    The aggregator publishes continuously and retries what `take_failed` returns; `replay
    --publish` writes a batch with `publish_all`, which waits for every acknowledgement.
    """

    def __init__(
        self,
        kafka: KafkaConnection,
        *,
        on_published: Callable[[], None] | None = None,
        on_failure: Callable[[RunKey, str], None] | None = None,
    ) -> None:
        self.topic = kafka.summaries_topic
        self._settings = kafka.settings
        self._codec = kafka.codec
        self._on_published = on_published
        self._on_failure = on_failure
        self._producer = kafka.durable_producer()
        self._partitions = kafka.partition_count(self.topic, self._producer)
        self._failed: list[tuple[RunKey, str]] = []  # touched by the publishing thread only

    def publish(self, pending: Iterable[tuple[RunKey, RunSummary | None]]) -> None:
        """Queue each summary (None: a tombstone for an emptied run)."""
        for run_key, summary in pending:
            value = None
            if summary is not None:
                try:
                    value = self._codec.encode_run_summary(summary, self.topic)
                except RegistryError as exc:  # the registry is away: a failed publication
                    self._fail(run_key, str(exc))
                    continue
            self._produce(run_key, value)

    def publish_all(self, summaries: Iterable[RunSummary], timeout_s: float = 30.0) -> int:
        """Publish the summaries and wait until all are acknowledged; return how many."""
        pending = [(summary.run_key, summary) for summary in summaries]
        self.publish(pending)
        remaining = self.flush(timeout_s)
        failed = self._failed
        self._failed = []
        if failed:
            raise ConsumerError(f"publishing summaries to {self.topic} failed: {failed[0][1]}")
        if remaining:
            raise ConsumerError(
                f"publishing summaries to {self.topic} failed: "
                f"not acknowledged within {timeout_s:.0f}s"
            )
        return len(pending)

    def poll(self) -> None:
        """Serve delivery reports without waiting."""
        self._producer.poll(0)

    def take_failed(self) -> list[RunKey]:
        """Run keys whose publication failed since the last call."""
        failed, self._failed = self._failed, []
        return [run_key for run_key, _ in failed]

    def flush(self, timeout_s: float) -> int:
        """Wait for queued summaries; log and return how many are left undelivered."""
        remaining: int = self._producer.flush(timeout_s)
        if remaining:
            log.error("%d summary publication(s) to %s not acknowledged", remaining, self.topic)
        return remaining

    def _produce(self, run_key: RunKey, value: bytes | None) -> None:
        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                denied = access_denied(self._settings, error, "WRITE", f"topic {self.topic}")
                self._fail(run_key, denied or error.str())
            elif self._on_published is not None:
                self._on_published()

        partition = partition_for(run_key, self._partitions)
        key = encode_run_key(run_key)
        try:
            produce(
                self._producer, self.topic, key, value, partition=partition, on_delivery=delivered
            )
        except KafkaClientError as exc:
            denied = access_denied(self._settings, exc, "WRITE", f"topic {self.topic}")
            self._fail(run_key, denied or str(exc))

    def _fail(self, run_key: RunKey, reason: str) -> None:
        self._failed.append((run_key, reason))
        if self._on_failure is not None:
            self._on_failure(run_key, reason)


def latest_summaries(
    kafka: KafkaConnection, run_keys: Iterable[RunKey], *, timeout_s: float = 30.0
) -> dict[RunKey, RunSummary | None]:
    """The summaries topic's latest value for each of these run keys that has one (None: a
    tombstone, or a value that cannot be decoded)."""
    wanted = {encode_run_key(run_key): run_key for run_key in run_keys}
    topic = kafka.summaries_topic
    latest: dict[RunKey, bytes | None] = {}
    consumer = kafka.reader()
    try:
        count = kafka.partition_count(topic, consumer, timeout_s=timeout_s)
        partitions = sorted({partition_for(run_key, count) for run_key in wanted.values()})
        _, messages = scan(consumer, topic, partitions, timeout_s)
        for message in messages:
            run_key = wanted.get(message.key() or b"")
            if run_key is not None:
                latest[run_key] = message.value()
    except KafkaException as exc:
        raise ConsumerError(f"cannot read {topic}: {exc.args[0]}") from exc
    finally:
        consumer.close()
    return {run_key: _decoded(kafka.codec, value, topic) for run_key, value in latest.items()}


def _decoded(codec: Codec, value: bytes | None, topic: str) -> RunSummary | None:
    if value is None:
        return None
    try:
        return codec.decode_run_summary(value, at=Location(topic))
    except DecodeError as exc:
        log.warning("ignoring an undecodable summary: %s", exc)
        return None
