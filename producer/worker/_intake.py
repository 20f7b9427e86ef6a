"""The worker's consumer side: the next task, and tasks held back while a chunk runs."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from resultlog.kafka import KafkaClientError

__all__ = ["Intake"]

log = logging.getLogger(__name__)

_REBALANCING = frozenset({KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION})
_COMMIT_PATIENCE_S = 10.0
_COMMIT_RETRY_S = 0.1


class Intake:
    """Polls the work topic; while a chunk runs, holds what arrives and pauses its partition.

    Polling on while busy keeps the group membership (max.poll.interval.ms) and serves
    rebalances. At most one task per partition is held (its partition paused), so a worker
    holds a bounded number of tasks and takes the held ones next, in arrival order. A
    partition is only resumed once its held task is done: Kafka delivers a resumed
    partition's next message only after a fetch round trip, which the held task hides.
    """

    def __init__(self, consumer: Consumer, topic: str) -> None:
        self.consumer = consumer
        self._topic = topic
        self._held: dict[int, Message] = {}
        self._paused: set[int] = set()

    def next(self, timeout_s: float) -> Message | None:
        """The oldest held task, else one polled within `timeout_s` (None: nothing yet)."""
        if self._held:
            return self._held.pop(next(iter(self._held)))
        message = self.consumer.poll(timeout_s)
        return message if message is not None and _usable(message) else None

    def serve(self) -> None:
        """One poll while busy: heartbeats and rebalances are served, an arrival is held."""
        message = self.consumer.poll(0)
        if message is None or not _usable(message):
            return
        partition = message.partition() or 0
        here = TopicPartition(self._topic, partition, message.offset() or 0)
        if partition in self._held:
            # Fetched before the pause took effect: give it back, to be read after the held one.
            self.consumer.seek(here)
        else:
            self._held[partition] = message
        self.consumer.pause([here])
        self._paused.add(partition)

    def done_with(self, partition: int) -> None:
        """A task of `partition` is settled: read on from it, unless its next task is held."""
        if partition in self._paused and partition not in self._held:
            self._paused.discard(partition)
            self.consumer.resume([TopicPartition(self._topic, partition)])

    def forget(self, partitions: Iterable[int]) -> None:
        """Revoked partitions: their held tasks are the next owner's (nothing was committed)."""
        for partition in partitions:
            self._held.pop(partition, None)
            self._paused.discard(partition)

    def commit(self, partition: int, offset: int) -> None:
        """Commit past a settled task, retrying while a rebalance is under way; a commit that
        stays refused only means the task will be seen again."""
        here = [TopicPartition(self._topic, partition, offset + 1)]
        deadline = time.monotonic() + _COMMIT_PATIENCE_S
        while True:
            try:
                self.consumer.commit(offsets=here, asynchronous=False)
                return
            except KafkaException as exc:
                error = exc.args[0]
                ours = partition in {tp.partition for tp in self.consumer.assignment()}
                # A rebalance moves the generation on: commit again once it is done.
                again = error.code() in _REBALANCING and ours
                if not again or time.monotonic() > deadline:
                    # Its next owner resumes the chunk, skipping every durable pair: the
                    # only cost is a resume read.
                    log.warning(
                        "commit of %s[%d]@%d refused: %s", self._topic, partition, offset, exc
                    )
                    return
            self.serve()
            time.sleep(_COMMIT_RETRY_S)


def _usable(message: Message) -> bool:
    """True for a task; an error event is logged (and raised when fatal)."""
    error = message.error()
    if error is None:
        return True
    if error.fatal():
        raise KafkaClientError(f"the work consumer failed: {error.str()}")
    log.info("work consumer: %s", error.str())
    return False
