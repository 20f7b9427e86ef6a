"""The aggregator's consumer thread: fold batches, publish changed runs, dead-letter poison.

The only writer of the shared state, always under its lock (see the package docstring).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from resultlog.consumers._index_codec import IndexedLog
from resultlog.consumers._ingest import Ingested, Ingestor
from resultlog.consumers.aggregator._index import RunIndexWriter
from resultlog.consumers.aggregator._kafka import delete_retention_ms, watermarks
from resultlog.consumers.aggregator._layout import MISSING, LayoutWatch, check_layout
from resultlog.consumers.aggregator._metrics import AggregatorMetrics
from resultlog.consumers.aggregator._opener import StoreOpener
from resultlog.consumers.aggregator._reconcile import SummaryWatcher
from resultlog.consumers.aggregator._restorer import Restore, Restorer
from resultlog.consumers.aggregator._state import AggregatorState, Job, Shared, utc_now
from resultlog.consumers.aggregator.standby import StandbyKeeper
from resultlog.consumers.aggregator.store import LogIdentity
from resultlog.consumers.dlq import DeadLetterWriter
from resultlog.consumers.errors import ConsumerError
from resultlog.consumers.fold import Contribution
from resultlog.consumers.summaries import SummaryPublisher
from resultlog.kafka import KafkaConnection, arrived
from resultlog.schemas import RegistryError, RunKey, RunSummary

__all__ = ["ConsumerLoop"]

log = logging.getLogger(__name__)
_BATCH = 2000
_APPLY_CHUNK = 200  # records folded per hold of the state lock
_IDLE_WAIT_S = 0.02  # also how soon an idle consumer thread serves a reader's request
_TICK_BUDGET_S = 0.01  # folding for publication per loop iteration, before consuming again
_ERROR_LOG_EVERY_S = 30.0
_REGISTRY_PAUSE_S = 1.0  # before reading again what the registry kept us from decoding
_REGISTRY_ERROR = -1  # the key of registry failures among the rate-limited error logs


class ConsumerLoop:
    """A joined group member and its producers; `run` is the consumer thread's body."""

    def __init__(
        self,
        kafka: KafkaConnection,
        shared: Shared,
        metrics: AggregatorMetrics,
        consumer: Consumer,
        *,
        stopping: threading.Event,
        publish_interval_s: float,
        state_dir: Path,
        standby: StandbyKeeper | None = None,
    ) -> None:
        """Check the topics, then subscribe `consumer` (closed on failure)."""
        self.topic = kafka.results_topic
        self.publish_interval_s = publish_interval_s
        self.failure: BaseException | None = None
        self._stopping = stopping
        self._shared = shared
        self._metrics = metrics
        self._consumer = consumer
        self._scanned: dict[int, int] = {}  # per partition: next offset never read before
        self._error_logged: dict[int, float] = {}
        self._kafka = kafka
        self._layout = LayoutWatch(kafka, [self.topic, kafka.summaries_topic])
        self._topic_id: str | None = None  # the ID of the results topic the state folds
        self._recreated = False  # a rebalance found another topic ID: rebuild everything
        self._missing: set[int] = set()  # partitions served stale while the topic is missing
        try:
            results = kafka.partition_count(self.topic, consumer)
            kafka.partition_count(kafka.summaries_topic, consumer)
            kafka.partition_count(kafka.dlq_topic, consumer)
            self._dlq = DeadLetterWriter(kafka, on_failure=self._dead_letter_failed)
            self._publisher = SummaryPublisher(
                kafka, on_published=metrics.published.inc, on_failure=self._publish_failed
            )
            self._watcher = SummaryWatcher(kafka)
            max_age_ms = delete_retention_ms(kafka)  # saved state older may miss a tombstone
            self._opener = StoreOpener(
                kafka, metrics, results, root=state_dir, max_age_ms=max_age_ms
            )
            self._restorer = Restorer(self._opener, standby)  # it stops the standby too
            self._restoring: set[int] = set()  # assigned, paused until their stores restored
            self._save_interval_s = kafka.settings.aggregator_save_interval_s
            self._index = RunIndexWriter(kafka, results)
            shared.state = AggregatorState(num_partitions=results)
            self._ingestor = Ingestor(kafka.codec, results)
            consumer.subscribe(
                [self.topic],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
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
            next_tick = time.monotonic() + self.publish_interval_s
            while not self._stopping.is_set():
                wait = min(_IDLE_WAIT_S, max(0.0, next_tick - time.monotonic()))
                self._handle(self._receive(wait))
                self._adopt()
                with self._shared.lock:
                    self._state.save(self._save_interval_s)
                self._reconcile()
                self._compute_wanted()
                self._publisher.poll()
                self._index.tick(self._positions())
                self._dlq.poll()
                # A tick spreads its folds over iterations, so ingestion and readers never
                # wait for every changed run to be folded at once.
                if time.monotonic() >= next_tick and self._tick(_TICK_BUDGET_S):
                    next_tick = time.monotonic() + self.publish_interval_s
                if self._layout.failure is not None:
                    raise self._layout.failure
                self._watch_topic_id()
            self._tick()
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

    def _receive(self, wait_s: float) -> list[Message]:
        try:
            batch = arrived(self._consumer, _BATCH, wait_s)
        except KafkaException as exc:
            raise ConsumerError(f"cannot consume {self.topic}: {exc.args[0]}") from exc
        return batch

    def _handle(self, batch: list[Message]) -> None:
        """Decode outside the lock, apply inside it, dead-letter after."""
        decoded: list[Ingested] = []
        ends: list[tuple[int, int]] = []
        unread: dict[int, int] = {}  # partition -> first offset the registry kept us from
        for message in batch:
            error = message.error()
            partition = message.partition() or 0
            if partition in self._restoring:  # fetched before its pause: read again later
                continue
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    self._consume_error(error)
                elif partition not in unread:
                    ends.append((partition, message.offset() or 0))
            elif partition not in unread:  # after a record the registry kept us from: later
                try:
                    decoded.append(self._ingestor.ingest(message))
                except RegistryError as exc:
                    unread[partition] = message.offset() or 0
                    self._registry_failed(exc)
        for start in range(0, len(decoded), _APPLY_CHUNK):
            # Released between chunks: a reader never waits for a whole batch to be folded.
            with self._shared.lock:
                chunk = decoded[start : start + _APPLY_CHUNK]
                self._apply_all(chunk)
                # Counted before the lock lets readers see the chunk: whoever sees the
                # folded state (or readiness) sees the records counted too.
                self._metrics.consumed.inc(len(chunk))
        with self._shared.lock:
            for partition, offset in ends:
                self._state.reached_end(partition, offset)
        self._dead_letter_all(decoded)
        if unread:
            self._read_again(unread)

    def _reconcile(self) -> None:
        """Correct what others wrote on the summaries topic (see _reconcile)."""
        self._watcher.poll()
        with self._shared.lock:
            for number, partition in self._state.partitions.items():
                if not partition.caught_up:  # served marked stale until caught up
                    partition.stale = self._watcher.held(number)
            found = self._watcher.corrections(self._state, utc_now())
            for run_key in found.republish:
                self._state.republish(run_key)
        if found.republish or found.tombstones:
            log.info(
                "correcting the summaries topic: %d republished, %d tombstoned",
                len(found.republish),
                len(found.tombstones),
            )
        self._publisher.publish((run_key, None) for run_key in found.tombstones)

    def _registry_failed(self, exc: RegistryError) -> None:
        now = time.monotonic()
        if now - self._error_logged.get(_REGISTRY_ERROR, -_ERROR_LOG_EVERY_S) >= _ERROR_LOG_EVERY_S:
            self._error_logged[_REGISTRY_ERROR] = now
            log.warning("the schema registry failed (will read again, not dead-letter): %s", exc)

    def _read_again(self, unread: dict[int, int]) -> None:
        """Rewind partitions to the records the registry kept us from decoding, then pause:
        a record is never dead-lettered because the registry was away."""
        for partition, offset in unread.items():
            try:
                self._consumer.seek(TopicPartition(self.topic, partition, offset))
            except KafkaException as exc:  # revoked meanwhile: its new owner reads it
                log.debug("cannot rewind %s[%d]: %s", self.topic, partition, exc)
        self._stopping.wait(_REGISTRY_PAUSE_S)

    def _positions(self) -> dict[int, int]:
        """Per assigned partition: the next offset to read (every record below is applied)."""
        with self._shared.lock:
            return {p: state.position for p, state in self._state.partitions.items()}

    def _apply_all(self, items: list[Ingested]) -> None:
        """Apply items in order, each run of consecutive records of one run key at once."""
        group: list[tuple[int, Contribution]] = []
        first: Ingested | None = None
        run_key: RunKey | None = None
        for item in items:
            record_id, contribution = item.record_id, item.contribution
            if first is not None and (
                contribution is None
                or record_id is None
                or item.partition != first.partition
                # the Ingestor hands out one RunKey object per run key: identity, mostly
                or (record_id.run_key is not run_key and record_id.run_key != run_key)
            ):
                self._put_run(first, run_key, group)
                first, group = None, []
            if contribution is None or record_id is None:
                self._apply(item)
            else:
                if first is None:
                    first, run_key = item, record_id.run_key
                group.append((item.offset, contribution))
        if first is not None:
            self._put_run(first, run_key, group)

    def _put_run(
        self, first: Ingested, run_key: RunKey | None, group: list[tuple[int, Contribution]]
    ) -> None:
        assert run_key is not None  # set with `first`
        self._index.note_all(first.partition, first.key, group[0][0], group[-1][0])
        self._state.put_run(first.partition, run_key, group)

    def _apply(self, item: Ingested) -> None:
        self._index.note(item.partition, item.offset, item.key)
        if item.record_id is None:
            self._state.advance(item.partition, item.offset)
        elif item.contribution is None:
            self._state.delete(item.partition, item.offset, item.record_id)
        else:
            self._state.put(item.partition, item.offset, item.record_id, item.contribution)

    def _dead_letter_all(self, items: list[Ingested]) -> None:
        """Dead-letter the undecodable among items read for the first time (a batch holds each
        partition's records in offset order); then note how far each partition was read."""
        scanned = self._scanned
        reached: dict[int, int] = {}
        for item in items:
            reached[item.partition] = item.offset
            if item.poison is not None and item.offset >= scanned.get(item.partition, 0):
                self._dead_letter(item)
        for partition, offset in reached.items():
            scanned[partition] = max(scanned.get(partition, 0), offset + 1)

    def _dead_letter(self, item: Ingested) -> None:
        assert item.poison is not None  # only the undecodable are dead-lettered
        sent = self._dlq.send(
            item.key,
            item.value,
            reason=item.poison.reason,
            kind=item.poison.kind,
            source_topic=self.topic,
            source_partition=item.partition,
            source_offset=item.offset,
        )
        if sent:  # not when an earlier reader of the log dead-lettered it already
            log.warning("dead-lettered a %s record: %s", item.poison.kind, item.poison.reason)
            self._metrics.dead_lettered.labels(reason=item.poison.kind).inc()

    def _consume_error(self, error: KafkaError) -> None:
        if error.fatal():
            raise ConsumerError(f"fatal consumer error on {self.topic}: {error.str()}")
        # librdkafka retries on its own and repeats the error on every poll while it lasts.
        now = time.monotonic()
        if now - self._error_logged.get(error.code(), -_ERROR_LOG_EVERY_S) >= _ERROR_LOG_EVERY_S:
            self._error_logged[error.code()] = now
            log.warning("consumer error on %s (retrying): %s", self.topic, error.str())

    def _compute_wanted(self, budget_s: float | None = None) -> None:
        """Compute the summaries readers (or the publisher) asked for, outside the lock."""
        with self._shared.lock:
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
        with self._shared.computed:
            self._state.cache_summaries(done, summaries)
            self._shared.computed.notify_all()

    def _tick(self, budget_s: float | None = None) -> bool:
        """Publish changed runs (within the budget) and refresh lag; True once all are out."""
        finished = self._publish_changed(budget_s=budget_s)
        if finished:
            with self._shared.lock:
                assigned = list(self._state.partitions)
            for partition in assigned:
                self._observe_high(partition)
        return finished

    def _publish_changed(
        self, partitions: set[int] | None = None, budget_s: float | None = None
    ) -> bool:
        """Publish the changed runs whose summaries are computed; True if none is left."""
        failed = self._publisher.take_failed()
        with self._shared.lock:
            for run_key in failed:
                self._state.republish(run_key)
            self._state.want_changed(partitions)
        self._compute_wanted(budget_s)
        with self._shared.lock:
            pending, finished = self._state.changed(utc_now(), partitions)
        self._publisher.publish(pending)
        return finished

    def _observe_high(self, partition: int) -> None:
        try:
            _, high = self._consumer.get_watermark_offsets(
                TopicPartition(self.topic, partition), cached=True
            )
        except KafkaException:
            return  # lag is informational; the next tick tries again
        if high is not None and high >= 0:
            with self._shared.lock:
                self._state.observe_high(partition, high)

    def _close(self) -> None:
        """Leave the group (revocation publishes what is pending), then flush the producers."""
        try:
            self._consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("closing the consumer: %s", exc)
        self._restorer.stop()
        self._watcher.close()
        self._index.close()
        with self._shared.lock:
            self._state.close()
        self._opener.close()
        self._publisher.flush(10.0)
        self._dlq.flush(10.0)

    def _abandon(self) -> None:
        """After a failure: release the clients without publishing anything more."""
        with self._shared.lock:
            self._state.close()
            self._state.partitions.clear()
        self._restorer.stop()
        self._opener.close()
        try:
            self._consumer.close()
        except Exception as exc:  # the consumer may already be broken; nothing else to do
            log.debug("closing a failed consumer: %s", exc)
        self._watcher.close()

    # -- rebalance callbacks (run on the consumer thread, inside consume/poll) ---------------

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Take the partitions paused, serve their summaries topic's summaries marked stale,
        and restore their stores on threads of their own: this returns at once."""
        fresh = [p.partition for p in partitions]
        if any(p >= self._state.num_partitions for p in fresh):
            # The topic grew: its run keys map elsewhere now.
            check_layout(self._kafka, consumer, [self.topic, self._kafka.summaries_topic])
        bounds = {p: watermarks(consumer, self.topic, p) for p in fresh}
        assigned = [TopicPartition(self.topic, p) for p in fresh]
        try:
            consumer.incremental_assign(assigned)
            consumer.pause(assigned)
        except KafkaException as exc:
            raise ConsumerError(f"cannot take {self.topic}: {exc.args[0]}") from exc
        self._restoring.update(fresh)
        self._serve_stale(bounds)
        self._restorer.start(bounds)
        with self._shared.lock:
            self._state.joined = True

    def _adopt(self) -> None:
        """Note the restores' progress; start reading each restored partition where its
        state ends."""
        progress = self._restorer.restoring()
        with self._shared.lock:
            for number, partition in self._state.partitions.items():
                partition.restore = progress.get(number)
        for restore in self._restorer.finished():
            if restore.error is not None:
                raise restore.error
            self._adopt_one(restore)

    def _adopt_one(self, restore: Restore) -> None:
        partition, (low, high), found = restore.partition, restore.bounds, restore.opened
        assert found is not None  # a restore that ended without error opened its store
        if partition not in self._restoring:  # revoked as it finished
            found.store.close()
            return
        self._identified([partition], restore.identity)
        start = found.next_offset
        with self._shared.lock:
            held = self._state.partitions.get(partition)
            if start is not None:
                self._state.restore(partition, high, start, found.folds, found.store)
            else:
                self._state.assign(partition, low, high, found.store)
            if held is not None:  # served stale until caught up
                self._state.partitions[partition].stale = held.stale
        self._metrics.rebuilds.inc()
        if start is None:
            log.info("rebuilding partition %d of %s", partition, self.topic)
        self._index.assign(partition, low, low if start is None else start)
        self._restoring.discard(partition)
        offset = OFFSET_BEGINNING if start is None else start
        try:
            self._consumer.incremental_unassign([TopicPartition(self.topic, partition)])
            self._consumer.incremental_assign([TopicPartition(self.topic, partition, offset)])
            # Paused is a partition's own flag: it outlives the assignment.
            self._consumer.resume([TopicPartition(self.topic, partition)])
        except KafkaException as exc:
            raise ConsumerError(f"cannot read {self.topic}[{partition}]: {exc.args[0]}") from exc

    def _watch_topic_id(self) -> None:
        """Rebuild everything once the results topic has another ID (deleted and re-created:
        another log); while it is missing, serve what is held marked stale."""
        seen, known = self._layout.seen_id, self._topic_id
        if self._recreated or (seen and known and seen != known):
            log.warning(
                "%s was deleted and re-created (topic ID %s, was %s): rebuilding its state",
                self.topic, seen, known,
            )  # fmt: skip
            self._topic_id = seen or known  # rebuilt once, even if its ID cannot be read now
            self._rebuild_all()
        elif seen == MISSING and known:
            with self._shared.lock:
                for number, partition in self._state.partitions.items():
                    if partition.caught_up:  # served from the summaries topic, stale
                        partition.caught_up = False
                        self._missing.add(number)
        elif seen == known and self._missing:  # it was not gone after all (a failed look)
            with self._shared.lock:
                for number in self._missing:
                    if number in self._state.partitions:
                        self._state.partitions[number].caught_up = True
            self._missing.clear()

    def _rebuild_all(self) -> None:
        """Drop every partition's state, publishing nothing, and take them again."""
        self._recreated = False
        self._missing.clear()
        with self._shared.lock:
            held = sorted(self._state.partitions)
        if not held:
            return
        for partition in held:
            self._index.revoke(partition, None)
        self._drop(set(held))
        self._watcher.other_log(held)  # its summaries name offsets of the deleted log
        assigned = [TopicPartition(self.topic, p) for p in held]
        try:
            self._consumer.incremental_unassign(assigned)
        except KafkaException as exc:
            raise ConsumerError(f"cannot rebuild {self.topic}: {exc.args[0]}") from exc
        self._on_assign(self._consumer, assigned)

    def _identified(self, fresh: list[int], identity: LogIdentity | None) -> None:
        """Note the results topic's ID the newly assigned partitions fold; partitions held
        from before of another ID are rebuilt next."""
        if identity is None:
            self._index.identify(None)
            return
        self._index.identify(IndexedLog(identity.topic, identity.cluster_id, identity.topic_id))
        if self._topic_id and identity.topic_id != self._topic_id:
            self._watcher.other_log(fresh)  # its summaries name offsets of the deleted log
            with self._shared.lock:
                self._recreated = any(p not in fresh for p in self._state.partitions)
        self._topic_id = identity.topic_id

    def _serve_stale(self, fresh: dict[int, tuple[int, int | None]]) -> None:
        """While their stores restore: serve the partitions' summaries topic's summaries
        (read as they arrive), marked stale, until the partitions caught up."""
        if not fresh:
            return
        self._watcher.assign(list(fresh))
        with self._shared.lock:
            for partition, (low, high) in fresh.items():
                self._state.assign(partition, low, high)
                placeholder = self._state.partitions[partition]
                placeholder.caught_up = False
                placeholder.stale = self._watcher.held(partition)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        gone = {p.partition for p in partitions}
        self._restorer.cancel(gone)
        self._restoring -= gone
        self._publish_changed(gone)
        positions = self._positions()
        for partition in gone:
            self._index.revoke(partition, positions.get(partition))
        self._drop(gone)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Another member may own these already: publish nothing, just forget them.
        lost = {p.partition for p in partitions}
        self._restorer.cancel(lost)
        self._restoring -= lost
        for partition in partitions:
            self._index.revoke(partition.partition, None)
        self._drop({p.partition for p in partitions}, lost=True)

    def _drop(self, partitions: set[int], *, lost: bool = False) -> None:
        self._watcher.revoke(partitions)
        with self._shared.lock:
            for partition in partitions:
                self._state.revoke(partition, lost=lost)
        if partitions:
            log.info("dropped partitions %s of %s", sorted(partitions), self.topic)

    def _dead_letter_failed(self, _reason: str) -> None:
        self._metrics.dead_letter_failures.inc()

    def _publish_failed(self, run_key: RunKey, reason: str) -> None:
        log.warning("publishing the summary of %s failed (will retry): %s", run_key, reason)
        self._metrics.publish_failures.inc()
