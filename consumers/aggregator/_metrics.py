"""The aggregator's Prometheus metrics, on a registry of its own (one per instance)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from resultlog.consumers.aggregator._health import Health
from resultlog.consumers.dlq import REASON_KINDS
from resultlog.schemas import RunKey

__all__ = ["STATE_IGNORED", "AggregatorMetrics", "RunSpend"]

_PREFIX = "resultlog_aggregator"

# Why a partition's state store was not used (the reasons of `store.Refused`).
STATE_IGNORED = (
    "missing", "corrupt", "foreign_cluster", "foreign_topic", "foreign_layout", "beyond_end",
    "truncated", "stale", "unidentified", "interrupted", "lost", "changelog",
)  # fmt: skip

# Each served run's key and its spend in USD (every attempt: the summary's spent_cost).
RunSpend = Callable[[], Iterable[tuple[RunKey, float]]]


class _StateCollector(Collector):
    """Gauges read from the aggregator's state at scrape time."""

    def __init__(self, snapshot: Callable[[], tuple[Health, int]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        health, runs = self._snapshot()
        for name, text, read in _STATE_GAUGES:
            value = read(health, runs)
            if isinstance(value, float):
                yield GaugeMetricFamily(f"{_PREFIX}_{name}", text, value=value)
                continue
            gauge = GaugeMetricFamily(f"{_PREFIX}_{name}", text, labels=["partition"])
            for partition, amount in value:
                gauge.add_metric([str(partition)], amount)
            yield gauge


# The state's gauges, in the exposition's order: a value, or one value per partition.
_STATE_GAUGES: tuple[
    tuple[str, str, Callable[[Health, int], float | list[tuple[int, int]]]], ...
] = (
    ("runs_tracked", "Runs held in memory.", lambda _, runs: float(runs)),
    (
        "partitions_assigned",
        "Results-topic partitions assigned to this instance.",
        lambda health, _: float(len(health.partitions)),
    ),
    (
        "ready",
        "1 when every assigned partition is caught up.",
        lambda health, _: float(health.ready),
    ),
    (
        "consumer_lag",
        "Records between the read position and the high watermark.",
        lambda health, _: [(p.partition, p.lag) for p in health.partitions],
    ),
    (
        "standby_partitions",
        "Results-topic partitions this instance keeps warm copies of (standby replicas).",
        lambda health, _: float(len(health.standby)),
    ),
    (
        "standby_lag",
        "Changelog records a warm copy has not applied yet.",
        lambda health, _: [(copy.partition, copy.behind) for copy in health.standby],
    ),
)


class _SpendCollector(Collector):
    """The spend of every run served, read from the folds at scrape time."""

    def __init__(self, spend: RunSpend) -> None:
        self._spend = spend

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            f"{_PREFIX}_run_spent_usd",
            "USD spent on a run's model attempts, superseded ones included (its spent_cost).",
            labels=["run_id", "benchmark_id", "model"],
        )
        for run_key, spent in self._spend():
            gauge.add_metric([run_key.run_id, run_key.benchmark_id, run_key.model], spent)
        yield gauge


class AggregatorMetrics:
    """Counters the consumer loop updates and gauges read from state when scraped."""

    def __init__(
        self, snapshot: Callable[[], tuple[Health, int]], spend: RunSpend | None = None
    ) -> None:
        self.registry = CollectorRegistry()
        self._count_records()
        self._count_states()
        self.registry.register(_StateCollector(snapshot))
        if spend is not None:
            self.registry.register(_SpendCollector(spend))

    def _count_records(self) -> None:
        """The counters of what became of the records read and the summaries written."""
        self.consumed = self._counter(
            "records_consumed", "Results-topic records consumed, re-reads during rebuilds included."
        )
        self.dead_lettered = self._counter(
            "dead_lettered", "Records sent to the dead-letter topic, by reason.", REASON_KINDS
        )
        self.dead_letter_failures = self._counter(
            "dead_letter_failures", "Dead letters that could not be delivered."
        )
        self.published = self._counter(
            "summaries_published",
            "Summaries (and run tombstones) acknowledged by the summaries topic.",
        )
        self.publish_failures = self._counter(
            "publish_failures", "Summary publications that failed (retried at the next tick)."
        )

    def _count_states(self) -> None:
        """The counters of what each partition assignment started from."""
        self.rebuilds = self._counter(
            "rebuilds",
            "Partition assignments (each resumes or restores its store, or re-folds it all).",
        )
        self.states_restored = self._counter(
            "states_restored",
            "Partition assignments that resumed a store (state directory, changelog or both).",
        )
        self.states_ignored = self._counter(
            "states_ignored",
            "Partition assignments whose state directory store was refused, by reason.",
            STATE_IGNORED,
        )

    def _counter(self, name: str, documentation: str, reasons: Sequence[str] = ()) -> Counter:
        """A counter on this registry; with `reasons`, labelled by reason, each shown from 0."""
        labels = ["reason"] if reasons else []
        counter = Counter(f"{_PREFIX}_{name}", documentation, labels, registry=self.registry)
        for reason in reasons:
            counter.labels(reason=reason)
        return counter

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
