"""Progress of a distributed run: its chunk tasks on the work topic and which of them are done.

A chunk is `failed` when its task was dead-lettered (it failed the same way too often), what
its records say notwithstanding; `done` when the worker group has committed past its task (a
worker commits only after the chunk has run) and every pair of its range is recorded
(degraded pairs by this task, not before it); `stopped` when the group committed past it
with pairs missing (stopped by the budget: submitting again finishes it); `running` when it
is not committed but some of its pairs are durable (a worker started it), and `waiting`
otherwise.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from confluent_kafka import KafkaException, Message

from resultlog.consumers._scan import scan
from resultlog.consumers.dlq import dead_letter_source
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

__all__ = [
    "ChunkProgress",
    "ChunkState",
    "LocatedTask",
    "RunTasks",
    "WorkProgress",
    "dead_lettered",
    "read_run_tasks",
    "run_tasks",
]

log = logging.getLogger(__name__)

ChunkState = Literal["done", "failed", "stopped", "running", "waiting"]
_STATES: tuple[ChunkState, ...] = ("done", "failed", "stopped", "running", "waiting")


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
        tasks: RunTasks | None = None,
    ) -> WorkProgress | None:
        """The run's chunk progress; None when it has no task (or there is no work topic).

        `tasks`: what `run_tasks` found, if it was read already (beside the run's records).
        """
        found = run_tasks(kafka, run_key) if tasks is None else tasks
        if found.missing:  # no work topic: the run was never distributed
            return None
        located, undecodable = found.located, found.undecodable
        if not located:
            return cls(group, (), undecodable) if undecodable else None
        newest = _newest_per_chunk(located)
        partitions = sorted({item.partition for item in newest})
        try:
            committed = kafka.committed_offsets(group, kafka.work_topic, partitions)
        except KafkaClientError as exc:
            raise ConsumerError(str(exc)) from exc
        dead = dead_lettered(kafka, run_key)
        chunks = tuple(
            _progress(
                item,
                committed.get(item.partition, 0) > item.offset,
                (item.partition, item.offset) in dead,
                records,
            )
            for item in newest
        )
        return cls(group, chunks, undecodable)


class RunTasks(NamedTuple):
    """The run's tasks on the work topic, and how many values there were undecodable."""

    located: list[LocatedTask]
    undecodable: int
    missing: bool = False  # there is no work topic


def run_tasks(kafka: KafkaConnection, run_key: RunKey) -> RunTasks:
    """`read_run_tasks`, or `missing` when there is no work topic."""
    try:
        return RunTasks(*read_run_tasks(kafka, run_key))
    except KafkaClientError:
        return RunTasks([], 0, missing=True)


def read_run_tasks(
    kafka: KafkaConnection, run_key: RunKey, *, timeout_s: float = 30.0
) -> tuple[list[LocatedTask], int]:
    """Every task of the run key on the work topic, and how many of its values are undecodable."""
    topic = kafka.work_topic
    found: list[LocatedTask] = []
    undecodable = 0
    with _run_messages(kafka, topic, run_key, timeout_s) as messages:
        for message in messages:
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
    return found, undecodable


def dead_lettered(
    kafka: KafkaConnection, run_key: RunKey, *, timeout_s: float = 30.0
) -> set[tuple[int, int]]:
    """Where the run's dead-lettered tasks were on the work topic: (partition, offset)."""
    found: set[tuple[int, int]] = set()
    try:
        with _run_messages(kafka, kafka.work_dlq_topic, run_key, timeout_s) as letters:
            for letter in letters:
                headers = letter.headers()
                source = dead_letter_source(headers) if isinstance(headers, list) else None
                if source is not None and source[0] == kafka.work_topic:
                    found.add(source[1:])
    except KafkaClientError:  # no dead-letter topic: nothing was dead-lettered
        pass
    return found


@contextlib.contextmanager
def _run_messages(
    kafka: KafkaConnection, topic: str, run_key: RunKey, timeout_s: float
) -> Iterator[Iterator[Message]]:
    """The messages of every partition of the topic whose keys are the run key's."""
    prefix = run_key_prefix(run_key)
    consumer = kafka.reader()
    try:
        count = kafka.partition_count(topic, consumer, timeout_s=timeout_s)
        _, messages = scan(consumer, topic, range(count), timeout_s)
        yield (m for m in messages if (key := m.key()) is not None and key.startswith(prefix))
    except KafkaException as exc:
        raise ConsumerError(f"cannot read {topic} for {run_key}: {exc.args[0]}") from exc
    finally:
        consumer.close()


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
    item: LocatedTask, done: bool, dead: bool, records: Sequence[SampleResult | FoldView]
) -> ChunkProgress:
    task = item.task
    mine = [
        record
        for record in records
        if task.start <= record.sample_index < task.end and record.epoch < task.epochs
    ]
    # A degraded record older than the task is no outcome of it: a chunk the budget stopped
    # before retrying it is not done (a clock behind the submitter's errs the same way).
    submitted_ms = round(task.created_at.timestamp() * 1000)  # whole ms on the wire
    settled = sum(not r.degraded or r.created_at_ms >= submitted_ms for r in mine)
    expected = (task.end - task.start) * task.epochs
    state: ChunkState
    if dead:
        state = "failed"
    elif done:
        state = "done" if settled >= expected else "stopped"
    else:
        state = "running" if mine else "waiting"
    return ChunkProgress(
        chunk_index=task.chunk_index,
        chunk_id=task.chunk_id,
        start=task.start,
        end=task.end,
        state=state,
        records=len(mine),
        expected=expected,
    )
