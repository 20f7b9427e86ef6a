"""Publishing run summaries to the compacted summaries topic, keyed and placed by run key."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from resultlog.consumers._aggregator_metrics import AggregatorMetrics
from resultlog.consumers._clients import client_config as with_logger
from resultlog.schemas import Codec, RunKey, RunSummary, encode_run_key, partition_for

__all__ = ["SummaryPublisher"]

log = logging.getLogger(__name__)
_PRODUCER: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "compression.type": "zstd",
}


class SummaryPublisher:
    """An idempotent acks=all producer of summaries; failed runs are handed back for a retry."""

    def __init__(
        self,
        client_config: Mapping[str, Any],
        topic: str,
        partitions: int,
        codec: Codec,
        metrics: AggregatorMetrics,
    ) -> None:
        self.topic = topic
        self._partitions = partitions
        self._codec = codec
        self._metrics = metrics
        self._producer = Producer(with_logger(client_config, **_PRODUCER))
        self._failed: list[RunKey] = []  # only touched on the consumer thread

    def publish(self, pending: list[tuple[RunKey, RunSummary | None]]) -> None:
        """Queue each summary (None: a tombstone for an emptied run)."""
        for run_key, summary in pending:
            value = None
            if summary is not None:
                value = self._codec.encode_run_summary(summary, self.topic)
            self._produce(run_key, value)
        if pending:
            self._producer.poll(0)

    def poll(self) -> None:
        """Serve delivery reports without waiting."""
        self._producer.poll(0)

    def take_failed(self) -> list[RunKey]:
        """Run keys whose publication failed since the last call."""
        failed, self._failed = self._failed, []
        return failed

    def flush(self, timeout_s: float) -> None:
        """Wait for queued summaries; log what is left undelivered."""
        remaining = self._producer.flush(timeout_s)
        if remaining:
            log.error("%d summary publication(s) to %s not acknowledged", remaining, self.topic)

    def _produce(self, run_key: RunKey, value: bytes | None) -> None:
        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is None:
                self._metrics.published.inc()
            else:
                self._fail(run_key, error.str())

        try:
            self._producer.produce(
                self.topic,
                key=encode_run_key(run_key),
                value=value,
                partition=partition_for(run_key, self._partitions),
                on_delivery=delivered,
            )
        except (KafkaException, BufferError) as exc:
            self._fail(run_key, str(exc))

    def _fail(self, run_key: RunKey, reason: str) -> None:
        log.warning("publishing the summary of %s failed (will retry): %s", run_key, reason)
        self._metrics.publish_failures.inc()
        self._failed.append(run_key)
