"""The aggregator's consumer thread: an ingest step, then every participant, each pass.

The only writer of the shared state, always under its lock (see the package docstring). The
ingest step folds what the group consumer reads; the participants (`participants`) do the
rest, each polled once a pass and told of the partitions' life by `_partitions`. Adding a
participant means adding it to the list built here, never changing the pass.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from confluent_kafka import KafkaException

from resultlog.consumers._ingest import Ingestor
from resultlog.consumers.aggregator._index import RunIndexWriter
from resultlog.consumers.aggregator._ingest_step import IngestStep
from resultlog.consumers.aggregator._kafka import delete_retention_ms
from resultlog.consumers.aggregator._layout import LayoutWatch
from resultlog.consumers.aggregator._member import Member
from resultlog.consumers.aggregator._partitions import Partitions
from resultlog.consumers.aggregator._reconcile import SummaryWatcher
from resultlog.consumers.aggregator._state import AggregatorState
from resultlog.consumers.aggregator.participants import (
    DeadLetters,
    Participant,
    Publication,
    Reconciliation,
    RunIndex,
    StoreFlush,
    TopicWatch,
    overriding,
    summary_publisher,
)
from resultlog.consumers.aggregator.standby import StandbyKeeper
from resultlog.consumers.aggregator.store import Restorer, StoreOpener

__all__ = ["ConsumerLoop"]

log = logging.getLogger(__name__)
_IDLE_WAIT_S = 0.02  # also how soon an idle consumer thread serves a reader's request


class ConsumerLoop:
    """A joined group member and its producers; `run` is the consumer thread's body."""

    def __init__(
        self,
        member: Member,
        *,
        stopping: threading.Event,
        publish_interval_s: float,
        state_dir: Path,
        standby: StandbyKeeper | None = None,
        extra: Sequence[Participant] = (),
    ) -> None:
        """Check the topics, then subscribe `consumer` (closed on failure); `extra`
        participants are polled after the aggregator's own."""
        kafka, shared, metrics, consumer = member
        self.topic = kafka.results_topic
        self.failure: BaseException | None = None
        self._stopping = stopping
        self._shared = shared
        self._consumer = consumer
        self._layout = LayoutWatch(
            kafka, [self.topic, kafka.summaries_topic], changelog=kafka.settings.changelog_topic
        )
        try:
            results = kafka.partition_count(self.topic, consumer)
            kafka.partition_count(kafka.summaries_topic, consumer)
            kafka.partition_count(kafka.dlq_topic, consumer)
            dead_letters = DeadLetters(kafka, metrics)
            publisher = summary_publisher(kafka, metrics)
            reconciliation = Reconciliation(shared, SummaryWatcher(kafka), publisher)
            max_age_ms = delete_retention_ms(kafka)  # saved state older may miss a tombstone
            self._opener = StoreOpener(
                kafka, metrics, results, root=state_dir, max_age_ms=max_age_ms
            )
            self._restorer = Restorer(self._opener, standby)  # it stops the standby too
            index = RunIndexWriter(kafka, results)
            shared.state = AggregatorState(num_partitions=results)
            # In the order of a pass (after the adoption of restored partitions).
            participants: list[Participant] = [
                StoreFlush(
                    shared,
                    kafka.settings.aggregator_save_interval_s,
                    self._layout,
                    self._opener.changelog,
                ),
                reconciliation,
                Publication(
                    shared, publisher, consumer, topic=self.topic, interval_s=publish_interval_s
                ),
                RunIndex(shared, index),
                dead_letters,
                TopicWatch(
                    shared, self._layout, reconciliation, topic=self.topic, rebuild=self._rebuild
                ),
                *extra,
            ]
            self._partitions = Partitions(
                member, restorer=self._restorer, participants=participants
            )
            self._participants: list[Participant] = [self._partitions, *participants]
            self._timed = overriding(self._participants, "deadline")
            self._ingest = IngestStep(
                member,
                ingestor=Ingestor(kafka.codec, results), index=index,
                restoring=self._partitions.restoring, participants=participants, stopping=stopping,
            )  # fmt: skip
            consumer.subscribe(
                [self.topic],
                on_assign=self._partitions.on_assign,
                on_revoke=self._partitions.on_revoke,
                on_lost=self._partitions.on_lost,
            )
        except BaseException:
            consumer.close()
            raise

    @property
    def _state(self) -> AggregatorState:
        return self._shared.state

    def run(self) -> None:
        """Consume until `stopping` is set (then publish, leave and flush) or a failure."""
        self._layout.start()
        try:
            while not self._stopping.is_set():
                self._ingest.step(self._wait_s())
                for participant in self._participants:
                    participant.poll(time.monotonic())
            for participant in self._participants:
                participant.finish()
            self._close()
        except BaseException as exc:
            self.failure = exc
            log.error("the aggregator stopped: %s", exc)
            self._abandon()
        finally:
            self._layout.stop()
            with self._shared.computed:
                self._state.running = False
                self._shared.computed.notify_all()

    def _wait_s(self) -> float:
        """How long the ingest step may wait for records: no later than a participant's
        deadline."""
        deadline = min((participant.deadline() for participant in self._timed), default=math.inf)
        return min(_IDLE_WAIT_S, max(0.0, deadline - time.monotonic()))

    def _rebuild(self) -> None:
        self._partitions.rebuild()

    def _close(self) -> None:
        """Leave the group (revocation publishes what is pending), then flush and release."""
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("closing the consumer: %s", exc)
        self._restorer.stop()
        with self._shared.lock:
            self._state.close()
        self._opener.close()
        for participant in self._participants:
            participant.close()

    def _abandon(self) -> None:
        """After a failure: release the clients without publishing anything more."""
        with self._shared.lock:
            self._state.close()
            self._state.partitions.clear()
        self._restorer.stop()
        self._opener.close()
        try:
            # Its revocation finds nothing to publish: the partitions were cleared.
            self._consumer.close()
        except Exception as exc:  # the consumer may already be broken; nothing else to do
            log.debug("closing a failed consumer: %s", exc)
        for participant in self._participants:
            participant.abandon()
