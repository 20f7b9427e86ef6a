"""Reconcile the summaries topic with the aggregator's own folds.

The aggregator publishes a run when its fold changes, but others write the summaries topic
too: `replay --publish` (maybe stale by the time it lands, maybe of a run that no longer
exists), or anything with write access. So the aggregator also reads the summaries partitions
of the results partitions it owns (a run key has the same partition number in both topics,
which the topic layout check guarantees), and once a partition is caught up it corrects what
it finds there:

- a summary another writer published that differs from its own fold: its own is republished;
- a summary of a run it does not hold (a phantom, or a run purged since): a tombstone;
- a tombstone, or an undecodable value, for a run it holds: its own summary again.

A summary the topic holds with source "aggregator" of a run it holds is its own (or a peer's
in its group, for partitions it did not own then, and it republishes every run when it takes a
partition over), so it is left alone: reading its own publications back never triggers a
publication. One of a run it does not hold is a phantom whoever wrote it (an aggregator of a
log since deleted or recreated, say) and gets its tombstone like any other. A summary
that names offsets past what this instance has read waits until it has read that far, so a
fresher replay is compared with an equally fresh fold, never answered with an older one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from resultlog.consumers._scan import watermark_offsets
from resultlog.consumers.aggregator._state import AggregatorState
from resultlog.kafka import KafkaConnection
from resultlog.schemas import Codec, DecodeError, Location, RunKey, RunSummary, decode_run_key

__all__ = ["Corrections", "SummaryWatcher"]

log = logging.getLogger(__name__)
_BATCH = 500
_OURS = "aggregator"
_METADATA_S = 5.0


class _Unreadable:
    """A summaries-topic value that could not be decoded."""


UNREADABLE = _Unreadable()
Observed = RunSummary | _Unreadable | None  # None: a tombstone


@dataclass
class Corrections:
    """What the aggregator must publish to make the summaries topic agree with its folds."""

    republish: list[RunKey]
    tombstones: list[RunKey]


class SummaryWatcher:
    """Reads the owned summaries partitions and decides the corrections (consumer thread)."""

    def __init__(self, kafka: KafkaConnection) -> None:
        self.topic = kafka.summaries_topic
        self._codec: Codec = kafka.codec
        self._consumer: Consumer = kafka.reader()
        self._pending: dict[int, dict[RunKey, Observed]] = {}
        # Per partition of a results topic re-created since: the summaries offset below which
        # values are of the deleted log (their offsets mean nothing now), and their run keys.
        self._before: dict[int, int] = {}
        self._old: dict[int, set[RunKey]] = {}

    def assign(self, partitions: list[int]) -> None:
        """Read these partitions from their beginning."""
        fresh = [p for p in partitions if p not in self._pending]
        for partition in fresh:
            self._pending[partition] = {}
        if fresh:
            try:
                # Leaders first: partitions assigned before the client knows them wait out
                # librdkafka's 500 ms offset-query retry before their first fetch.
                self._consumer.list_topics(self.topic, timeout=_METADATA_S)
            except KafkaException as exc:  # the assignment still works, just later
                log.debug("cannot read %s's metadata: %s", self.topic, exc)
            self._consumer.incremental_assign(
                [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in fresh]
            )

    def other_log(self, partitions: list[int]) -> None:
        """The results topic was re-created: what these (revoked) partitions hold up to now is
        of the deleted log, compared once caught up however far its offsets go."""
        for partition in partitions:
            try:
                self._before[partition] = watermark_offsets(
                    self._consumer, self._tp(partition), 5.0
                )[1]
            except KafkaException as exc:  # then those wait for the offsets they name
                log.debug("cannot read %s's ends: %s", self.topic, exc)
                continue
            self._old[partition] = set()

    def revoke(self, partitions: set[int]) -> None:
        """Stop reading these partitions and forget what was seen there."""
        for partition in partitions:
            self._before.pop(partition, None)
            self._old.pop(partition, None)
        gone = [p for p in partitions if self._pending.pop(p, None) is not None]
        if gone:
            self._consumer.incremental_unassign([TopicPartition(self.topic, p) for p in gone])

    def held(self, partition: int) -> Mapping[RunKey, Observed]:
        """The partition's latest values read and not compared yet (live, not a copy)."""
        return self._pending.get(partition, {})

    def poll(self, wait_s: float = 0.0) -> None:
        """Take what arrived (waiting at most `wait_s`; the latest value per run key wins)."""
        try:
            batch = self._consumer.consume(num_messages=_BATCH, timeout=wait_s)
        except KafkaException as exc:  # informational: the next poll tries again
            log.debug("cannot read %s: %s", self.topic, exc)
            return
        for message in batch:
            partition = message.partition()
            pending = self._pending.get(partition if partition is not None else -1)
            key = message.key()
            if message.error() is not None or pending is None or key is None:
                continue
            try:
                run_key = decode_run_key(key)
            except DecodeError:
                continue  # not a run's summary: nothing of ours to compare it with
            pending[run_key] = self._observe(message.value())
            old = self._old.get(partition if partition is not None else -1)
            if old is not None:
                if (message.offset() or 0) < self._before[partition or 0]:
                    old.add(run_key)
                else:
                    old.discard(run_key)

    def catch_up(self, partitions: list[int], timeout_s: float) -> None:
        """Read these partitions to their current end (for at most `timeout_s`): what is
        served, marked stale, while their state restores."""
        deadline = time.monotonic() + timeout_s
        try:
            ends = {p: watermark_offsets(self._consumer, self._tp(p), 5.0) for p in partitions}
        except KafkaException as exc:
            log.debug("cannot read %s's ends: %s", self.topic, exc)
            return
        while time.monotonic() < deadline:
            try:
                at = self._consumer.position([self._tp(p) for p in ends])
            except KafkaException:
                return
            if all(p.offset >= ends[p.partition][1] or _empty(ends[p.partition]) for p in at):
                return
            self.poll(0.05)

    def _tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.topic, partition)

    def corrections(self, state: AggregatorState, now: datetime) -> Corrections:
        """What to publish for the values seen in caught-up partitions (those are then done)."""
        found = Corrections([], [])
        for number, pending in self._pending.items():
            partition = state.partitions.get(number)
            if partition is None or not partition.caught_up or not pending:
                continue
            old = self._old.get(number, set())
            for run_key, observed in list(pending.items()):
                if run_key not in old and _ahead(observed, number, partition.position):
                    continue  # compare once this instance has read as far
                del pending[run_key]
                ours = partition.summary(run_key, now)
                _correct(run_key, observed, ours, found)
        return found

    def close(self) -> None:
        """Release the consumer."""
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.debug("closing the summaries reader: %s", exc)

    def _observe(self, value: bytes | None) -> Observed:
        if value is None:
            return None
        try:
            return self._codec.decode_run_summary(value, at=Location(self.topic))
        except DecodeError:
            return UNREADABLE


def _empty(bounds: tuple[int, int]) -> bool:
    low, high = bounds
    return high <= max(low, 0)


def _ahead(observed: Observed, partition: int, position: int) -> bool:
    """Whether the observed summary covers results this instance has not read yet."""
    if not isinstance(observed, RunSummary) or observed.as_of is None:
        return False
    return observed.as_of.offsets.get(str(partition), 0) > position


def _correct(
    run_key: RunKey, observed: Observed, ours: RunSummary | None, found: Corrections
) -> None:
    if isinstance(observed, RunSummary):
        if ours is None:  # a run without records has no summary, whoever wrote one
            found.tombstones.append(run_key)
        elif observed.as_of is not None and observed.as_of.source == _OURS:
            return
        elif _bare(ours) != _bare(observed):
            found.republish.append(run_key)
    elif ours is not None:  # a tombstone or garbage where a live run's summary belongs
        found.republish.append(run_key)
    elif observed is UNREADABLE:
        found.tombstones.append(run_key)


def _bare(summary: RunSummary) -> RunSummary:
    return summary.model_copy(update={"as_of": None})
