"""The dead letters' participant: the undecodable records the ingest step folded, dead-lettered."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from resultlog.consumers._ingest import Ingested
from resultlog.consumers.aggregator._metrics import AggregatorMetrics
from resultlog.consumers.aggregator.participants._base import Participant
from resultlog.consumers.dlq import DeadLetterWriter
from resultlog.kafka import KafkaConnection

__all__ = ["DeadLetters"]

log = logging.getLogger(__name__)
_FLUSH_S = 10.0


class DeadLetters(Participant):
    """Dead-letters each undecodable record once per instance (a rebuild reads it again)."""

    def __init__(self, kafka: KafkaConnection, metrics: AggregatorMetrics) -> None:
        self._topic = kafka.results_topic
        self._metrics = metrics
        self._scanned: dict[int, int] = {}  # per partition: next offset never read before
        self._writer = DeadLetterWriter(kafka, on_failure=self._failed)

    def poll(self, now: float) -> None:
        """Serve delivery reports."""
        self._writer.poll()

    def ingested(self, items: Sequence[Ingested]) -> None:
        """Dead-letter the undecodable among items read for the first time (a batch holds each
        partition's records in offset order); then note how far each partition was read."""
        scanned = self._scanned
        reached: dict[int, int] = {}
        for item in items:
            reached[item.partition] = item.offset
            if item.poison is not None and item.offset >= scanned.get(item.partition, 0):
                self._dead_letter(item)
        for partition, offset in reached.items():
            scanned[partition] = max(scanned.get(partition, 0), offset + 1)

    def close(self) -> None:
        """Deliver what is queued."""
        self._writer.flush(_FLUSH_S)

    def _dead_letter(self, item: Ingested) -> None:
        assert item.poison is not None  # only the undecodable are dead-lettered
        sent = self._writer.send(
            item.key,
            item.value,
            reason=item.poison.reason,
            kind=item.poison.kind,
            source_topic=self._topic,
            source_partition=item.partition,
            source_offset=item.offset,
        )
        if sent:  # not when an earlier reader of the log dead-lettered it already
            log.warning("dead-lettered a %s record: %s", item.poison.kind, item.poison.reason)
            self._metrics.dead_lettered.labels(reason=item.poison.kind).inc()

    def _failed(self, _reason: str) -> None:
        self._metrics.dead_letter_failures.inc()
