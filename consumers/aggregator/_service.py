"""The Aggregator: a consumer-group member whose summaries are published and served."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar, Unpack

from resultlog.consumers.aggregator._health import Health
from resultlog.consumers.aggregator._kafka import consumer_overrides
from resultlog.consumers.aggregator._loop import ConsumerLoop
from resultlog.consumers.aggregator._member import Member
from resultlog.consumers.aggregator._metrics import AggregatorMetrics
from resultlog.consumers.aggregator._state import Lookup, RunsPage, RunsQuery, Shared, utc_now
from resultlog.consumers.aggregator.standby import StandbyKeeper
from resultlog.consumers.aggregator.store import MOVED_ASIDE
from resultlog.consumers.resume import RunRecords, read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, RunSummary

__all__ = ["Aggregator"]

T = TypeVar("T")
_RECORDS_TIMEOUT_S = 20.0  # an HTTP request reading a run's records gives up after this


class Aggregator:
    """A consumer-group member folding the results topic into published, served summaries."""

    def __init__(
        self,
        kafka: KafkaConnection,
        *,
        group_id: str | None = None,
        publish_interval_s: float = 0.2,
        instance_id: str | None = None,
        session_timeout_ms: int = 10_000,
        state_dir: Path | None = None,
    ) -> None:
        """An aggregator on the connection's topics, in `group_id` (default: the settings'),
        keeping its per-key state under `state_dir` (default: the settings')."""
        self.results_topic = kafka.results_topic
        self.summaries_topic = kafka.summaries_topic
        self.group_id = group_id or kafka.settings.aggregator_group
        self.publish_interval_s = publish_interval_s
        self.state_dir = state_dir if state_dir is not None else kafka.settings.state_dir()
        self._kafka = kafka
        self._consumer_overrides = consumer_overrides(session_timeout_ms, instance_id)
        # One lock guards the state: the consumer thread mutates it, HTTP threads read it.
        self._shared = Shared()
        self.metrics = AggregatorMetrics(self._snapshot, self._spend)
        self._stopping = threading.Event()
        self._loop: ConsumerLoop | None = None
        self._standby: StandbyKeeper | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Connect, check the topics, join the group and start the consumer thread."""
        if self._thread is not None:
            raise RuntimeError("the aggregator was already started")
        consumer = self._kafka.group_consumer(self.group_id, self._consumer_overrides)
        replicas = self._kafka.settings.aggregator_standby_replicas
        if replicas > 0:
            self._standby = StandbyKeeper(
                self._kafka, consumer, self.group_id, self.state_dir, replicas
            )
        self._loop = ConsumerLoop(
            Member(self._kafka, self._shared, self.metrics, consumer),
            stopping=self._stopping,
            publish_interval_s=self.publish_interval_s,
            state_dir=self.state_dir,
            standby=self._standby,
        )
        self._shared.state.running = True
        self._thread = threading.Thread(
            target=self._loop.run, name="resultlog-aggregator", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Publish pending summaries, leave the group, flush; idempotent."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the consumer thread ends; True if it did."""
        if self._thread is None:
            return True
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    @property
    def failure(self) -> BaseException | None:
        """Why the consumer thread stopped on its own, if it did."""
        return self._loop.failure if self._loop is not None else None

    @property
    def running(self) -> bool:
        """True while the consumer thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> Aggregator:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- read side (any thread) -------------------------------------------------------------

    def lookup(self, run_key: RunKey) -> Lookup:
        """A run's current summary, including every record applied before the call."""
        return self._fresh(lambda late: self._shared.state.lookup(run_key, utc_now(), compute=late))

    def summaries(self, **query: Unpack[RunsQuery]) -> list[RunSummary]:
        """Current summaries of the runs `query` asks for (of all this instance serves, by
        default), in run key order."""
        return self.page(**query).summaries

    def page(self, **query: Unpack[RunsQuery]) -> RunsPage:
        """A page of the current summaries `query` asks for, and how many match in all."""
        return self._fresh(lambda late: self._shared.state.page(utc_now(), compute=late, **query))

    def _fresh(self, attempt: Callable[[bool], T | None]) -> T:
        """Answer from current summaries, computing stale ones here, under the lock."""
        # The fold's summary costs O(1) (tens of microseconds): waiting for the consumer
        # thread to compute it cost a reader up to one poll of that thread (~20 ms).
        with self._shared.computed:
            answer = attempt(True)
        assert answer is not None  # compute=True always answers
        return answer

    def run_records(self, run_key: RunKey, stop: threading.Event | None = None) -> RunRecords:
        """The run key's latest records, read from its partition now (the resume reader, so
        through the run index): the per-sample views of the runs page, which the fold's
        totals do not keep. Gives up (ConsumerError) once `stop` is set."""
        return read_run_records(self._kafka, run_key, timeout_s=_RECORDS_TIMEOUT_S, stop=stop)

    def health(self) -> Health:
        """Readiness, per-partition lag and the warm copies kept for other instances."""
        with self._shared.lock:
            health = self._shared.state.health()
        return self._with_standby(health)

    def _with_standby(self, health: Health) -> Health:
        """With the warm copies kept, and the stores moved aside."""
        health = dataclasses.replace(health, moved_aside=tuple(MOVED_ASIDE))
        if self._standby is None:
            return health
        return dataclasses.replace(health, standby=self._standby.health())

    def exposition(self) -> tuple[bytes, str]:
        """The /metrics body (Prometheus text format) and its content type."""
        return self.metrics.exposition()

    def _snapshot(self) -> tuple[Health, int]:
        with self._shared.lock:
            health, runs = self._shared.state.health(), self._shared.state.runs_tracked()
        return self._with_standby(health), runs

    def _spend(self) -> list[tuple[RunKey, float]]:
        """Each served run's spend (caught-up partitions only: a rebuild would under-report)."""
        with self._shared.lock:
            partitions = self._shared.state.partitions.values()
            return [
                (run_key, float(run.fold.spent))
                for partition in partitions
                if partition.caught_up
                for run_key, run in partition.runs.items()
                if len(run.fold)
            ]
