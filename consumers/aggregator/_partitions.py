"""The assigned partitions' life: taken paused, restored off the rebalance path, adopted, then
revoked, lost or rebuilt; the participants are told at each step.

The rebalance callbacks run on the consumer thread, inside its consume or close.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from confluent_kafka import Consumer, KafkaException, TopicPartition

from resultlog.consumers.aggregator._kafka import watermarks
from resultlog.consumers.aggregator._layout import check_layout
from resultlog.consumers.aggregator._member import Member
from resultlog.consumers.aggregator.participants import (
    Adoption,
    Participant,
    Revocation,
    Why,
    positions,
)
from resultlog.consumers.aggregator.store import Restore, Restorer
from resultlog.consumers.errors import ConsumerError

__all__ = ["Partitions"]

log = logging.getLogger(__name__)


class Partitions(Participant):
    """The group consumer's rebalance callbacks and the restores they start; its poll adopts
    the partitions whose stores are restored."""

    def __init__(
        self, member: Member, *, restorer: Restorer, participants: Sequence[Participant]
    ) -> None:
        self._kafka, self._shared, self._metrics, self._consumer = member
        self.topic = self._kafka.results_topic
        # Assigned, paused until their stores restored (changed in place: the ingest step
        # holds this set too).
        self.restoring: set[int] = set()
        self._restorer = restorer
        self._participants = participants

    def poll(self, now: float) -> None:
        """Note the restores' progress; start reading each restored partition where its
        state ends."""
        progress = self._restorer.restoring()
        with self._shared.lock:
            for number, partition in self._shared.state.partitions.items():
                partition.restore = progress.get(number)
        for restore in self._restorer.finished():
            if restore.error is not None:
                raise restore.error
            self._adopt(restore)

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Take the partitions paused, tell the participants (the summaries topic's summaries
        are served marked stale), and restore their stores on threads of their own: this
        returns at once."""
        state = self._shared.state
        fresh = [p.partition for p in partitions]
        if any(p >= state.num_partitions for p in fresh):
            # The topic grew: its run keys map elsewhere now.
            check_layout(self._kafka, consumer, [self.topic, self._kafka.summaries_topic])
        bounds = {p: watermarks(consumer, self.topic, p) for p in fresh}
        assigned = [TopicPartition(self.topic, p, _parked_at(bounds[p])) for p in fresh]
        try:
            consumer.incremental_assign(assigned)
            consumer.pause(assigned)
        except KafkaException as exc:
            raise ConsumerError(f"cannot take {self.topic}: {exc.args[0]}") from exc
        self.restoring.update(fresh)
        for participant in self._participants:
            participant.assigned(bounds)
        self._restorer.start(bounds)
        with self._shared.lock:
            state.joined = True

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Publish what is pending for the partitions, then drop them."""
        self._drop({p.partition for p in partitions}, Why.REVOKED)

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Drop the partitions: another member may own them already, so publish nothing."""
        self._drop({p.partition for p in partitions}, Why.LOST)

    def rebuild(self) -> None:
        """Drop every partition's state, publishing nothing, and take them again."""
        with self._shared.lock:
            held = sorted(self._shared.state.partitions)
        if not held:
            return
        self._drop(set(held), Why.RECREATED)
        assigned = [TopicPartition(self.topic, p) for p in held]
        try:
            self._consumer.incremental_unassign(assigned)
        except KafkaException as exc:
            raise ConsumerError(f"cannot rebuild {self.topic}: {exc.args[0]}") from exc
        self.on_assign(self._consumer, assigned)

    def _drop(self, partitions: set[int], why: Why) -> None:
        """Stop restoring the partitions, tell the participants while the state still holds
        them (a revocation publishes their pending runs), then drop them."""
        self._restorer.cancel(partitions)
        self.restoring.difference_update(partitions)
        revocation = Revocation(frozenset(partitions), why, positions(self._shared))
        for participant in self._participants:
            participant.revoked(revocation)
        state = self._shared.state
        with self._shared.lock:
            for partition in partitions:
                # A lost partition's store keeps only what was flushed: it is another's now.
                state.revoke(partition, lost=why is Why.LOST)
        if partitions:
            log.info("dropped partitions %s of %s", sorted(partitions), self.topic)

    def _adopt(self, restore: Restore) -> None:
        partition, (low, high), found = restore.partition, restore.bounds, restore.opened
        assert found is not None  # a restore that ended without error opened its store
        if partition not in self.restoring:  # revoked as it finished
            found.store.close()
            return
        start = found.next_offset
        state = self._shared.state
        with self._shared.lock:
            held = state.partitions.get(partition)
            if start is not None:
                state.restore(partition, high, start, found.folds, found.store)
            else:
                state.assign(partition, low, high, found.store)
            if held is not None:  # served stale until caught up
                state.partitions[partition].stale = held.stale
        self._metrics.rebuilds.inc()
        if start is None:
            log.info("rebuilding partition %d of %s", partition, self.topic)
        adoption = Adoption(partition, low, start, restore.identity)
        for participant in self._participants:
            participant.adopted(adoption)
        self.restoring.discard(partition)
        offset = low if start is None else start  # absolute: see `_parked_at`
        try:
            self._consumer.incremental_unassign([TopicPartition(self.topic, partition)])
            self._consumer.incremental_assign([TopicPartition(self.topic, partition, offset)])
            # Paused is a partition's own flag: it outlives the assignment.
            self._consumer.resume([TopicPartition(self.topic, partition)])
        except KafkaException as exc:
            raise ConsumerError(f"cannot read {self.topic}[{partition}]: {exc.args[0]}") from exc


def _parked_at(bounds: tuple[int, int | None]) -> int:
    """The absolute offset a partition is taken at, paused, until its store is restored."""
    # Taken without one, librdkafka looks an offset up (the committed one, else
    # auto.offset.reset's), and an answer that arrives after the adoption assigned where the
    # store ends overrides that (a race in librdkafka): under load, a restored partition was read
    # again from its start.
    low, high = bounds
    return low if high is None else high
