"""The aggregator: folds the results topic into run summaries, publishes and serves them.

Crash safety: state is rebuilt from the compacted log, never from committed offsets. On every
partition assignment the aggregator seeks that partition to its beginning and re-folds it (the
log is the checkpoint); on revocation it publishes what is pending for the partition, then
drops its run keys and stops serving them. All records of a run key live in one partition
(records found elsewhere are dead-lettered as misrouted, since resume and replay never see
them), so per-partition state is self-contained: a SIGKILL at any moment followed by a
restart, or a rebalance between instances of one group, converges to what replay computes.
Nothing is committed: offsets would name a resume point this design never uses; lag is
exported on /healthz and /metrics instead. Assignment uses cooperative-sticky, so a rebalance
only re-folds partitions that actually moved; its callbacks receive only the delta.

A partition is caught up once it has been read up to the high watermark seen when it was
assigned (or to its end); until then its runs are neither published nor served, so a rebuild
never publishes a partial summary. Once caught up, every run of the partition is published
(the previous owner may have died before publishing), then only runs that changed, at most
every `publish_interval_s`. A record whose key is fine but whose value cannot be decoded
leaves its key without a record, exactly as replay does; it never stops the service.

Threads: the consumer loop runs in its own thread and is the only writer of the state, always
under one lock. HTTP threads read under that lock but do not fold: a reader of a run that changed
asks the consumer thread for its summary and waits on a condition; the consumer thread computes
it between batches, outside the lock (no other thread changes a fold), so a slow summary never
starves ingestion, concurrent readers share one computation, and the answer still includes every
record applied before the request. If the consumer thread is busy past a bound (a rebalance) or
stopped, the reader computes under the lock itself.

Dead letters are written once per instance (offsets already read by this instance are not
dead-lettered again when a partition is rebuilt), but another instance or a restart will
write them again: DLQ delivery is at-least-once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from resultlog.consumers._aggregator_health import Health
from resultlog.consumers._aggregator_kafka import consumer_overrides, watermarks
from resultlog.consumers._aggregator_metrics import AggregatorMetrics
from resultlog.consumers._aggregator_state import AggregatorState, Job, Lookup, utc_now
from resultlog.consumers._ingest import Ingested, ingest
from resultlog.consumers.dlq import DeadLetterWriter
from resultlog.consumers.errors import ConsumerError
from resultlog.consumers.summaries import SummaryPublisher
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, RunSummary

__all__ = ["Aggregator", "Health", "Lookup"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_BATCH = 2000
_IDLE_WAIT_S = 0.02  # also how soon an idle consumer thread serves a reader's request
_FRESH_WAIT_S = 0.5  # how long a reader waits for the consumer thread before folding itself
_TICK_BUDGET_S = 0.01  # folding for publication per loop iteration, before consuming again
_ERROR_LOG_EVERY_S = 30.0


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
    ) -> None:
        """An aggregator on the connection's topics, in `group_id` (default: the settings')."""
        self.results_topic = kafka.results_topic
        self.summaries_topic = kafka.summaries_topic
        self.group_id = group_id or kafka.settings.aggregator_group
        self.publish_interval_s = publish_interval_s
        self._kafka = kafka
        self._consumer_overrides = consumer_overrides(session_timeout_ms, instance_id)
        self._codec = kafka.codec
        # One lock guards the state: the consumer thread mutates it, HTTP threads read it.
        self._lock = threading.Lock()
        self._computed = threading.Condition(self._lock)
        self._state = AggregatorState(num_partitions=1)
        self.metrics = AggregatorMetrics(self._snapshot)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._scanned: dict[int, int] = {}  # per partition: next offset never read before
        self._error_logged: dict[int, float] = {}

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Connect, check the topics, join the group and start the consumer thread."""
        if self._thread is not None:
            raise RuntimeError("the aggregator was already started")
        kafka = self._kafka
        self._consumer = kafka.group_consumer(self.group_id, self._consumer_overrides)
        try:
            results = kafka.partition_count(self.results_topic, self._consumer)
            kafka.partition_count(self.summaries_topic, self._consumer)
            kafka.partition_count(kafka.dlq_topic, self._consumer)
            self._dlq = DeadLetterWriter(kafka, on_failure=self._dead_letter_failed)
            self._publisher = SummaryPublisher(
                kafka, on_published=self.metrics.published.inc, on_failure=self._publish_failed
            )
            self._state = AggregatorState(num_partitions=results)
            self._consumer.subscribe(
                [self.results_topic],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
        except BaseException:
            self._consumer.close()
            raise
        self._state.running = True
        self._thread = threading.Thread(target=self._run, name="resultlog-aggregator", daemon=True)
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
        return self._failure

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
        return self._fresh(lambda late: self._state.lookup(run_key, utc_now(), compute=late))

    def summaries(
        self,
        *,
        run_id: str | None = None,
        benchmark: str | None = None,
        model: str | None = None,
        limit: int | None = None,
    ) -> list[RunSummary]:
        """Current summaries of the runs this instance serves, in run key order."""
        return self._fresh(
            lambda late: self._state.summaries(
                utc_now(),
                compute=late,
                run_id=run_id,
                benchmark=benchmark,
                model=model,
                limit=limit,
            )
        )

    def _fresh(self, attempt: Callable[[bool], T | None]) -> T:
        """Answer from fresh summaries, waiting for the consumer thread to compute stale ones."""
        deadline = time.monotonic() + _FRESH_WAIT_S
        with self._computed:
            while True:
                late = not self.running or time.monotonic() >= deadline
                answer = attempt(late)
                if answer is not None:
                    return answer
                self._computed.wait(max(0.0, deadline - time.monotonic()))

    def health(self) -> Health:
        """Readiness and per-partition lag."""
        with self._lock:
            return self._state.health()

    def exposition(self) -> tuple[bytes, str]:
        """The /metrics body (Prometheus text format) and its content type."""
        return self.metrics.exposition()

    def _snapshot(self) -> tuple[Health, int]:
        with self._lock:
            return self._state.health(), self._state.runs_tracked()

    # -- the consumer thread ----------------------------------------------------------------

    def _run(self) -> None:
        try:
            next_tick = time.monotonic() + self.publish_interval_s
            while not self._stopping.is_set():
                wait = min(_IDLE_WAIT_S, max(0.0, next_tick - time.monotonic()))
                self._handle(self._receive(wait))
                self._compute_wanted()
                self._publisher.poll()
                self._dlq.poll()
                # A tick spreads its folds over iterations, so ingestion and readers never
                # wait for every changed run to be folded at once.
                if time.monotonic() >= next_tick and self._tick(_TICK_BUDGET_S):
                    next_tick = time.monotonic() + self.publish_interval_s
            self._tick()
            self._close()
        except BaseException as exc:
            self._failure = exc
            log.error("the aggregator stopped: %s", exc)
            self._abandon()
        finally:
            with self._computed:
                self._state.running = False
                self._computed.notify_all()

    def _receive(self, wait_s: float) -> list[Message]:
        try:
            batch: list[Message] = self._consumer.consume(num_messages=_BATCH, timeout=0)
            if not batch:
                # poll() returns as soon as one message arrives; consume() would wait it out.
                message = self._consumer.poll(wait_s)
                batch = [message] if message is not None else []
        except KafkaException as exc:
            raise ConsumerError(f"cannot consume {self.results_topic}: {exc.args[0]}") from exc
        return batch

    def _handle(self, batch: list[Message]) -> None:
        """Decode outside the lock, apply inside it, dead-letter after."""
        decoded: list[Ingested] = []
        ends: list[tuple[int, int]] = []
        for message in batch:
            error = message.error()
            if error is None:
                decoded.append(ingest(message, self._codec, self._state.num_partitions))
            elif error.code() == KafkaError._PARTITION_EOF:
                ends.append((message.partition() or 0, message.offset() or 0))
            else:
                self._consume_error(error)
        with self._lock:
            for item in decoded:
                self._apply(item)
            for partition, offset in ends:
                self._state.reached_end(partition, offset)
        self.metrics.consumed.inc(len(decoded))
        for item in decoded:
            self._dead_letter(item)

    def _apply(self, item: Ingested) -> None:
        if item.record_id is None:
            self._state.advance(item.partition, item.offset)
        elif item.record is None:
            self._state.delete(item.partition, item.offset, item.record_id)
        else:
            self._state.put(item.partition, item.offset, item.record_id, item.record)

    def _dead_letter(self, item: Ingested) -> None:
        first_read = item.offset >= self._scanned.get(item.partition, 0)
        self._scanned[item.partition] = max(self._scanned.get(item.partition, 0), item.offset + 1)
        if item.poison is None or not first_read:
            return
        log.warning("dead-lettering a %s record: %s", item.poison.kind, item.poison.reason)
        self.metrics.dead_lettered.labels(reason=item.poison.kind).inc()
        self._dlq.send(
            item.key,
            item.value,
            reason=item.poison.reason,
            kind=item.poison.kind,
            source_topic=self.results_topic,
            source_partition=item.partition,
            source_offset=item.offset,
        )

    def _consume_error(self, error: KafkaError) -> None:
        if error.fatal():
            raise ConsumerError(f"fatal consumer error on {self.results_topic}: {error.str()}")
        # librdkafka retries on its own and repeats the error on every poll while it lasts.
        now = time.monotonic()
        if now - self._error_logged.get(error.code(), -_ERROR_LOG_EVERY_S) >= _ERROR_LOG_EVERY_S:
            self._error_logged[error.code()] = now
            log.warning("consumer error on %s (retrying): %s", self.results_topic, error.str())

    def _compute_wanted(self, budget_s: float | None = None) -> None:
        """Compute the summaries readers (or the publisher) asked for, outside the lock."""
        with self._lock:
            jobs = self._state.take_jobs(utc_now())
        if not jobs:
            return
        done: list[Job] = []
        summaries: list[RunSummary] = []
        started = time.monotonic()
        for job in jobs:
            if done and budget_s is not None and time.monotonic() - started > budget_s:
                break  # the rest stay stale: readers ask again, the next tick goes on
            done.append(job)
            summaries.append(job.compute())
        with self._computed:
            self._state.store(done, summaries)
            self._computed.notify_all()

    def _tick(self, budget_s: float | None = None) -> bool:
        """Publish changed runs (within the budget) and refresh lag; True once all are out."""
        finished = self._publish_changed(budget_s=budget_s)
        if finished:
            with self._lock:
                assigned = list(self._state.partitions)
            for partition in assigned:
                self._observe_high(partition)
        return finished

    def _publish_changed(
        self, partitions: set[int] | None = None, budget_s: float | None = None
    ) -> bool:
        """Publish the changed runs whose summaries are computed; True if none is left."""
        failed = self._publisher.take_failed()
        with self._lock:
            for run_key in failed:
                self._state.republish(run_key)
            self._state.want_changed(partitions)
        self._compute_wanted(budget_s)
        with self._lock:
            pending, finished = self._state.changed(utc_now(), partitions)
        self._publisher.publish(pending)
        return finished

    def _observe_high(self, partition: int) -> None:
        try:
            _, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.results_topic, partition), cached=True
            )
        except KafkaException:
            return  # lag is informational; the next tick tries again
        if high is not None and high >= 0:
            with self._lock:
                self._state.observe_high(partition, high)

    def _close(self) -> None:
        """Leave the group (revocation publishes what is pending), then flush the producers."""
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("closing the consumer: %s", exc)
        self._publisher.flush(10.0)
        self._dlq.flush(10.0)

    def _abandon(self) -> None:
        """After a failure: release the clients without publishing anything more."""
        with self._lock:
            self._state.partitions.clear()
        try:
            self._consumer.close()
        except Exception as exc:  # the consumer may already be broken; nothing else to do
            log.debug("closing a failed consumer: %s", exc)

    # -- rebalance callbacks (run on the consumer thread, inside consume/poll) ---------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        fresh = [p.partition for p in partitions]
        bounds = {p: watermarks(consumer, self.results_topic, p) for p in fresh}
        with self._lock:
            self._state.joined = True
            for partition, (low, high) in bounds.items():
                self._state.assign(partition, low, high)
        self.metrics.rebuilds.inc(len(fresh))
        if fresh:
            log.info("rebuilding partitions %s of %s", fresh, self.results_topic)
        consumer.incremental_assign(
            [TopicPartition(self.results_topic, p, OFFSET_BEGINNING) for p in fresh]
        )

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {p.partition for p in partitions}
        self._publish_changed(gone)
        self._drop(gone)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Another member may own these already: publish nothing, just forget them.
        self._drop({p.partition for p in partitions})

    def _drop(self, partitions: set[int]) -> None:
        with self._lock:
            for partition in partitions:
                self._state.revoke(partition)
        if partitions:
            log.info("dropped partitions %s of %s", sorted(partitions), self.results_topic)

    def _dead_letter_failed(self, _reason: str) -> None:
        self.metrics.dead_letter_failures.inc()

    def _publish_failed(self, run_key: RunKey, reason: str) -> None:
        log.warning("publishing the summary of %s failed (will retry): %s", run_key, reason)
        self.metrics.publish_failures.inc()
