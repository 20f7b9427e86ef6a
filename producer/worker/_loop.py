"""The worker: one member of a consumer group on the work topic, running one chunk at a time."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Message, TopicPartition

from resultlog.consumers.dlq import reason_kind
from resultlog.kafka import KafkaConnection
from resultlog.producer.errors import TopicRecreatedError
from resultlog.producer.lease import LeaseHeldError
from resultlog.producer.worker._chunk import ChunkRunner, RunningChunk
from resultlog.producer.worker._dead import CHUNK_FAILED, WorkDeadLetters
from resultlog.producer.worker._intake import Intake
from resultlog.schemas import ChunkTask, DecodeError, Location

__all__ = ["ChunkWorker", "WorkerOptions", "WorkerReport"]

log = logging.getLogger(__name__)

_POLL_S = 0.1
_DRAIN_WAIT_S = 30.0  # for the pairs in flight to finish, then as long for a cancel
_METADATA_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class WorkerOptions:
    """How a worker serves the work topic (the rest comes from the connection's settings)."""

    group: str
    concurrency: int = 8
    max_chunks: int | None = None


@dataclass
class WorkerReport:
    """What a worker did: tasks run, dead-lettered, undecodable, and chunks it abandoned."""

    chunks_run: int = 0
    dead_lettered: int = 0
    undecodable: int = 0
    abandoned: int = 0
    pairs_evaluated: int = 0
    budget_stopped: int = 0
    chunk_ids: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        budget = f", {self.budget_stopped} stopped by the budget" if self.budget_stopped else ""
        return (
            f"{self.chunks_run} chunks run ({self.pairs_evaluated} pairs evaluated{budget}), "
            f"{self.dead_lettered} dead-lettered, {self.undecodable} undecodable, "
            f"{self.abandoned} abandoned"
        )


class ChunkWorker:
    """Consumes chunk tasks as one member of a consumer group and runs each with the runner.

    A task's offset is committed only after its chunk has run (or was dead-lettered). While a
    chunk runs the consumer keeps polling, holding what arrives with its partition paused, so
    the group membership survives chunks far longer than max.poll.interval.ms. A chunk whose
    partition is revoked or lost, or that is running when `stop()` is called, starts no more
    pairs, finishes and writes those in flight (cancelled if they outlast a bound), and is
    left uncommitted: whoever takes the task next resumes it from the log.
    """

    def __init__(self, kafka: KafkaConnection, options: WorkerOptions) -> None:
        self._kafka = kafka
        self._options = options
        self._settings = kafka.settings
        self._topic = kafka.work_topic
        self._stopping = threading.Event()
        self._intake: Intake | None = None
        self._running: RunningChunk | None = None
        self._in_flight: int | None = None  # the partition of the task being run
        self._lost = False
        self.report = WorkerReport()

    def stop(self) -> None:
        """Ask the worker to leave (safe from a signal handler): a running chunk is drained."""
        self._stopping.set()

    def run(self) -> WorkerReport:
        """Serve the work topic until stopped or `max_chunks` tasks are settled."""
        self._kafka.partition_count(self._topic, timeout_s=_METADATA_TIMEOUT_S)  # exists?
        chunks = ChunkRunner(self._kafka, concurrency=self._options.concurrency)
        dead = WorkDeadLetters(self._kafka)
        consumer = self._kafka.group_consumer(self._options.group, self._consumer_config())
        intake = self._intake = Intake(consumer, self._topic)
        try:
            consumer.subscribe(
                [self._topic],
                on_assign=self._assigned,
                on_revoke=self._revoked,
                on_lost=self._revoked,
            )
            while not self._stopping.is_set() and not self._enough():
                message = intake.next(_POLL_S)
                if message is not None:
                    self._take(intake, message, chunks, dead)
        finally:
            try:
                chunks.close()  # what finished is durable before the group hands tasks on
            finally:
                consumer.close()  # leave the group: an abandoned task moves on at once
        return self.report

    def _consumer_config(self) -> dict[str, object]:
        settings = self._settings
        return {
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            # Only the partitions that move are revoked: a rebalance (a worker joining or
            # dying) leaves every other worker's running chunk alone.
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": settings.work_session_timeout_ms,
            "heartbeat.interval.ms": max(100, settings.work_session_timeout_ms // 5),
            "max.poll.interval.ms": settings.work_max_poll_interval_ms,
            # Tasks are few and long: prefetch little of what another worker could take.
            "queued.min.messages": 10,
        }

    def _enough(self) -> bool:
        limit = self._options.max_chunks
        return limit is not None and self.report.chunks_run + self.report.dead_lettered >= limit

    def _take(
        self, intake: Intake, message: Message, chunks: ChunkRunner, dead: WorkDeadLetters
    ) -> None:
        """Run one task to an end: committed, dead-lettered, or abandoned to the group."""
        partition, offset = message.partition() or 0, message.offset() or 0
        try:
            task = self._kafka.codec.decode_chunk_task(
                message.value(), at=Location(self._topic, partition, offset)
            )
        except DecodeError as exc:
            log.warning("dead-lettering an undecodable task: %s", exc)
            dead.send(message, reason=str(exc), kind=reason_kind(exc), attempts=0)
            intake.commit(partition, offset)
            self.report.undecodable += 1
            intake.done_with(partition)
            return
        self._in_flight, self._lost = partition, False
        try:
            if self._attempt_all(intake, message, task, chunks, dead):
                intake.done_with(partition)
        finally:
            self._in_flight = self._running = None

    def _attempt_all(
        self,
        intake: Intake,
        message: Message,
        task: ChunkTask,
        chunks: ChunkRunner,
        dead: WorkDeadLetters,
    ) -> bool:
        """Attempt the chunk until it runs or fails max_attempts times in a row (True), or
        until it must be abandoned (False)."""
        settings = self._settings
        partition, offset = message.partition() or 0, message.offset() or 0
        failures: list[str] = []
        while True:
            log.info("chunk %s [%d, %d) starts", task.chunk_id, task.start, task.end)
            self._running = chunks.start(task)
            if not self._wait(intake, self._running):
                return self._abandon(task)
            result, error = self._running.result, self._running.error
            if result is not None:
                intake.commit(partition, offset)
                self.report.chunks_run += 1
                self.report.pairs_evaluated += result.evaluated
                self.report.chunk_ids.append(task.chunk_id)
                log.info("chunk %s done: %d pairs evaluated", task.chunk_id, result.evaluated)
                if result.stopped_by_budget:  # settled: running it again would stop again
                    self.report.budget_stopped += 1
                    log.warning(
                        "chunk %s stopped by the run's budget: %d pairs not started",
                        task.chunk_id,
                        result.unstarted,
                    )
                return True
            if isinstance(error, LeaseHeldError):
                # Another writer holds (part of) the chunk's samples: not a failure of the
                # chunk. Wait for it, then resume: what it made durable is not asked again.
                log.info("chunk %s waits: %s", task.chunk_id, error)
                if not self._pause_for(intake, self._lease_wait_s()):
                    return self._abandon(task)
                continue
            if isinstance(error, TopicRecreatedError):
                # Every attempt would fail alike: the worker stops, the task uncommitted.
                raise error
            failures.append(f"{type(error).__name__}: {error}")
            log.warning("chunk %s failed (attempt %d): %s", task.chunk_id, len(failures), error)
            if len(failures) >= settings.work_max_attempts:
                reason = _reasons(failures)
                dead.send(message, reason=reason, kind=CHUNK_FAILED, attempts=len(failures))
                intake.commit(partition, offset)
                self.report.dead_lettered += 1
                log.error("chunk %s dead-lettered: %s", task.chunk_id, reason)
                return True
            delay = settings.work_retry_backoff_s * 2 ** (len(failures) - 1)
            if not self._pause_for(intake, delay):
                return self._abandon(task)

    def _lease_wait_s(self) -> float:
        """How long to wait before claiming a held chunk again: a fraction of a lease's life."""
        return min(5.0, self._settings.lease_ttl_s / 6)

    def _wait(self, intake: Intake, running: RunningChunk) -> bool:
        """Poll (serving the group) until the attempt ends; False if it must be abandoned."""
        while not running.wait(_POLL_S):
            intake.serve()
            if self._stopping.is_set() or self._lost:
                return False
        return True

    def _pause_for(self, intake: Intake, delay_s: float) -> bool:
        """Poll (serving the group) for `delay_s`; False if the chunk must be abandoned."""
        deadline = time.monotonic() + delay_s
        while time.monotonic() < deadline:
            intake.serve()
            if self._stopping.is_set() or self._lost:
                return False
            time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))
        return True

    def _abandon(self, task: ChunkTask) -> bool:
        """Drain the running attempt; its task stays uncommitted for the group."""
        running = self._running
        if running is not None and not running.drain(_DRAIN_WAIT_S):
            log.error("chunk %s did not stop within %.0fs", task.chunk_id, _DRAIN_WAIT_S)
        self.report.abandoned += 1
        why = "stopping" if self._stopping.is_set() else "its partition was revoked"
        log.warning("chunk %s abandoned (%s); what is durable stays", task.chunk_id, why)
        return False

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        consumer.incremental_assign(partitions)
        # A partition paused here before it was revoked stays paused when it comes back.
        consumer.resume(partitions)
        if partitions:
            log.info("assigned %s", sorted(p.partition for p in partitions))

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        revoked = {p.partition for p in partitions}
        if revoked:
            log.info("revoked %s", sorted(revoked))
        if self._intake is not None:
            self._intake.forget(revoked)
        if self._in_flight is None or self._in_flight not in revoked:
            return
        # Stop before the partition's next owner starts the same chunk, but let the pairs in
        # flight finish and be written: their answers are paid for already. (A lost partition
        # may have a new owner by now; the chunk's lease keeps it off these samples until
        # this attempt has ended.)
        self._lost = True
        if self._running is not None:
            self._running.drain(_DRAIN_WAIT_S)


def _reasons(failures: list[str]) -> str:
    """The distinct failure reasons of a task, most frequent first, on one line."""
    counts: dict[str, int] = {}
    for failure in failures:
        counts[failure] = counts.get(failure, 0) + 1
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    return "; ".join(f"{reason} (x{count})" for reason, count in ranked)
