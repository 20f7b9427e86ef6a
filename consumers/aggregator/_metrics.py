"""The aggregator's Prometheus metrics, on a registry of its own (one per instance)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from resultlog.consumers.aggregator._health import Health
from resultlog.consumers.dlq import REASON_KINDS

__all__ = ["AggregatorMetrics"]

_PREFIX = "resultlog_aggregator"


class _StateCollector(Collector):
    """Gauges read from the aggregator's state at scrape time."""

    def __init__(self, snapshot: Callable[[], tuple[Health, int]]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        health, runs = self._snapshot()
        yield GaugeMetricFamily(f"{_PREFIX}_runs_tracked", "Runs held in memory.", value=runs)
        yield GaugeMetricFamily(
            f"{_PREFIX}_partitions_assigned",
            "Results-topic partitions assigned to this instance.",
            value=len(health.partitions),
        )
        yield GaugeMetricFamily(
            f"{_PREFIX}_ready",
            "1 when every assigned partition is caught up.",
            value=float(health.ready),
        )
        lag = GaugeMetricFamily(
            f"{_PREFIX}_consumer_lag",
            "Records between the read position and the high watermark.",
            labels=["partition"],
        )
        for partition in health.partitions:
            lag.add_metric([str(partition.partition)], partition.lag)
        yield lag


class AggregatorMetrics:
    """Counters the consumer loop updates and gauges read from state when scraped."""

    def __init__(self, snapshot: Callable[[], tuple[Health, int]]) -> None:
        self.registry = CollectorRegistry()
        self.consumed = Counter(
            f"{_PREFIX}_records_consumed",
            "Results-topic records consumed, re-reads during rebuilds included.",
            registry=self.registry,
        )
        self.dead_lettered = Counter(
            f"{_PREFIX}_dead_lettered",
            "Records sent to the dead-letter topic, by reason.",
            ["reason"],
            registry=self.registry,
        )
        for kind in REASON_KINDS:
            self.dead_lettered.labels(reason=kind)
        self.dead_letter_failures = Counter(
            f"{_PREFIX}_dead_letter_failures",
            "Dead letters that could not be delivered.",
            registry=self.registry,
        )
        self.published = Counter(
            f"{_PREFIX}_summaries_published",
            "Summaries (and run tombstones) acknowledged by the summaries topic.",
            registry=self.registry,
        )
        self.publish_failures = Counter(
            f"{_PREFIX}_publish_failures",
            "Summary publications that failed (retried at the next tick).",
            registry=self.registry,
        )
        self.rebuilds = Counter(
            f"{_PREFIX}_rebuilds",
            "Partition assignments, each re-folding the partition from its beginning.",
            registry=self.registry,
        )
        self.registry.register(_StateCollector(snapshot))

    def exposition(self) -> tuple[bytes, str]:
        """The Prometheus text exposition and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
