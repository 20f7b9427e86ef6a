"""The summary publisher's participant: publishes changed runs, computes what readers asked for."""

from __future__ import annotations

import logging
import time
from dataclasses import KW_ONLY, dataclass, field

from confluent_kafka import Consumer, KafkaException, TopicPartition

from resultlog.consumers.aggregator._metrics import AggregatorMetrics
from resultlog.consumers.aggregator._state import Job, Shared, utc_now
from resultlog.consumers.aggregator.participants._base import Participant, Revocation
from resultlog.consumers.summaries import SummaryPublisher
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, RunSummary

__all__ = ["Publication", "summary_publisher"]

log = logging.getLogger(__name__)
_TICK_BUDGET_S = 0.01  # folding for publication per pass, before consuming again
_FLUSH_S = 10.0


def summary_publisher(kafka: KafkaConnection, metrics: AggregatorMetrics) -> SummaryPublisher:
    """The aggregator's publisher of summaries, counted in its metrics."""

    def failed(run_key: RunKey, reason: str) -> None:
        log.warning("publishing the summary of %s failed (will retry): %s", run_key, reason)
        metrics.publish_failures.inc()

    return SummaryPublisher(kafka, on_published=metrics.published.inc, on_failure=failed)


@dataclass(eq=False)
class Publication(Participant):
    """Every `interval_s`, publishes the changed runs of caught-up partitions (their lag
    refreshed once all are out); every pass, computes the summaries readers asked for."""

    shared: Shared
    publisher: SummaryPublisher
    consumer: Consumer
    _: KW_ONLY
    topic: str
    interval_s: float
    _next_tick: float = field(init=False)

    def __post_init__(self) -> None:
        self._next_tick = time.monotonic() + self.interval_s

    def deadline(self) -> float:
        """When the next publication is due."""
        return self._next_tick

    def poll(self, now: float) -> None:
        """Serve readers' requests; publish within a budget once due."""
        self._compute_wanted()
        self.publisher.poll()
        # A tick spreads its folds over passes, so ingestion and readers never wait for
        # every changed run to be folded at once.
        if now >= self._next_tick and self._tick(_TICK_BUDGET_S):
            self._next_tick = time.monotonic() + self.interval_s

    def revoked(self, revocation: Revocation) -> None:
        """Publish what is pending for revoked partitions (their next owner starts after)."""
        if revocation.publishes:
            self._publish_changed(set(revocation.partitions))

    def finish(self) -> None:
        """Publish every changed run, however long it takes."""
        self._tick()

    def close(self) -> None:
        """Deliver what is queued."""
        self.publisher.flush(_FLUSH_S)

    def _compute_wanted(self, budget_s: float | None = None) -> None:
        """Compute the summaries readers (or the publisher) asked for, outside the lock."""
        with self.shared.lock:
            jobs = self.shared.state.take_jobs(utc_now())
        if not jobs:
            return
        done: list[Job] = []
        summaries: list[RunSummary] = []
        started = time.monotonic()
        for job in jobs:
            if done and budget_s is not None and time.monotonic() - started > budget_s:
                break  # the rest stay stale: readers ask again, the next tick goes on
            done.append(job)
            summaries.append(job.compute())
        with self.shared.computed:
            self.shared.state.cache_summaries(done, summaries)
            self.shared.computed.notify_all()

    def _tick(self, budget_s: float | None = None) -> bool:
        """Publish changed runs (within the budget) and refresh lag; True once all are out."""
        finished = self._publish_changed(budget_s=budget_s)
        if finished:
            with self.shared.lock:
                assigned = list(self.shared.state.partitions)
            for partition in assigned:
                self._observe_high(partition)
        return finished

    def _publish_changed(
        self, partitions: set[int] | None = None, budget_s: float | None = None
    ) -> bool:
        """Publish the changed runs whose summaries are computed; True if none is left."""
        failed = self.publisher.take_failed()
        state = self.shared.state
        with self.shared.lock:
            for run_key in failed:
                state.republish(run_key)
            state.want_changed(partitions)
        self._compute_wanted(budget_s)
        with self.shared.lock:
            pending, finished = state.changed(utc_now(), partitions)
        self.publisher.publish(pending)
        return finished

    def _observe_high(self, partition: int) -> None:
        try:
            _, high = self.consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), cached=True
            )
        except KafkaException:
            return  # lag is informational; the next tick tries again
        if high is not None and high >= 0:
            with self.shared.lock:
                self.shared.state.observe_high(partition, high)
