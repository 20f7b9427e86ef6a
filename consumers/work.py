"""Progress of a distributed run: its chunk tasks on the work topic and which of them are done.

A chunk is `done` when the worker group has committed past its task (a worker commits only
after the chunk has run) and every pair of its range is recorded; `stopped` when the group
committed past it with pairs missing (dead-lettered, or stopped by the budget: submitting
again finishes it); `running` when it is not committed but some of its pairs are durable (a
worker started it), and `waiting` otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from confluent_kafka import KafkaException

from resultlog.consumers._scan import scan
from resultlog.consumers.errors import ConsumerError
from resultlog.kafka import KafkaClientError, KafkaConnection
from resultlog.schemas import (
    ChunkTask,
    DecodeError,
    FoldView,
    Location,
    RunKey,
    SampleResult,
    run_key_prefix,
)

__all__ = ["ChunkProgress", "ChunkState", "LocatedTask", "WorkProgress", "read_run_tasks"]

log = logging.getLogger(__name__)

ChunkState = Literal["done", "stopped", "running", "waiting"]
_STATES: tuple[ChunkState, ...] = ("done", "stopped", "running", "waiting")


class LocatedTask(NamedTuple):
    """A chunk task and where it is on the work topic."""

    partition: int
    offset: int
    task: ChunkTask


@dataclass(frozen=True)
class ChunkProgress:
    """One chunk: its range, its state, and its latest records of the `expected` pairs."""

    chunk_index: int
    chunk_id: str
    start: int
    end: int
    state: ChunkState
    records: int
    expected: int


@dataclass(frozen=True)
class WorkProgress:
    """The chunks of a run (its newest submission of each) as the worker group sees them."""

    group: str
    chunks: tuple[ChunkProgress, ...]
    undecodable: int = 0

    def count(self, state: ChunkState) -> int:
        """How many chunks are in this state."""
        return sum(chunk.state == state for chunk in self.chunks)

    def as_json(self) -> dict[str, object]:
        """Counts per state and one entry per chunk, as `status --json` prints them."""
        return {
            "group": self.group,
            "total": len(self.chunks),
            **{state: self.count(state) for state in _STATES},
            "undecodable": self.undecodable,
            "list": [vars(chunk) for chunk in self.chunks],
        }

    @classmethod
    def read(
        cls,
        kafka: KafkaConnection,
        run_key: RunKey,
        records: Sequence[SampleResult | FoldView],
        group: str,
    ) -> WorkProgress | None:
        """The run's chunk progress; None when it has no task (or there is no work topic)."""
        try:
            located, undecodable = read_run_tasks(kafka, run_key)
        except KafkaClientError:  # no work topic: the run was never distributed
            return None
        if not located:
            return cls(group, (), undecodable) if undecodable else None
        newest = _newest_per_chunk(located)
        partitions = sorted({item.partition for item in newest})
        try:
            committed = kafka.committed_offsets(group, kafka.work_topic, partitions)
        except KafkaClientError as exc:
            raise ConsumerError(str(exc)) from exc
        chunks = tuple(
            _progress(item, committed.get(item.partition, 0) > item.offset, records)
            for item in newest
        )
        return cls(group, chunks, undecodable)


def read_run_tasks(
    kafka: KafkaConnection, run_key: RunKey, *, timeout_s: float = 30.0
) -> tuple[list[LocatedTask], int]:
    """Every task of the run key on the work topic, and how many of its values are undecodable."""
    topic = kafka.work_topic
    consumer = kafka.reader()
    prefix = run_key_prefix(run_key)
    found: list[LocatedTask] = []
    undecodable = 0
    try:
        count = kafka.partition_count(topic, consumer, timeout_s=timeout_s)
        _, messages = scan(consumer, topic, range(count), timeout_s)
        for message in messages:
            key = message.key()
            if key is None or not key.startswith(prefix):
                continue
            partition, offset = message.partition() or 0, message.offset() or 0
            try:
                task = kafka.codec.decode_chunk_task(
                    message.value(), at=Location(topic, partition, offset)
                )
            except DecodeError as exc:
                undecodable += 1
                log.warning("status ignores an undecodable task: %s", exc)
                continue
            if task.run_key == run_key:
                found.append(LocatedTask(partition, offset, task))
    except KafkaException as exc:
        raise ConsumerError(f"cannot read {topic} for {run_key}: {exc.args[0]}") from exc
    finally:
        consumer.close()
    return found, undecodable


def _newest_per_chunk(located: list[LocatedTask]) -> list[LocatedTask]:
    """The newest submission of each chunk index (a re-submission replaces the plan)."""
    newest: dict[int, LocatedTask] = {}
    for item in located:
        old = newest.get(item.task.chunk_index)
        if old is None or (item.task.created_at, item.offset) > (old.task.created_at, old.offset):
            newest[item.task.chunk_index] = item
    latest_plan = max(item.task.created_at for item in newest.values())
    # A re-submission with fewer chunks leaves older chunk indexes behind: not this plan's.
    chunks = next(i.task.chunks for i in newest.values() if i.task.created_at == latest_plan)
    return [newest[index] for index in sorted(newest) if index < chunks]


def _progress(
    item: LocatedTask, done: bool, records: Sequence[SampleResult | FoldView]
) -> ChunkProgress:
    task = item.task
    durable = sum(
        task.start <= record.sample_index < task.end and record.epoch < task.epochs
        for record in records
    )
    expected = (task.end - task.start) * task.epochs
    state: ChunkState
    if done:
        state = "done" if durable >= expected else "stopped"
    else:
        state = "running" if durable else "waiting"
    return ChunkProgress(
        chunk_index=task.chunk_index,
        chunk_id=task.chunk_id,
        start=task.start,
        end=task.end,
        state=state,
        records=durable,
        expected=expected,
    )
