"""The consumer loop's checkpoints: restore on assignment, write every N records or T seconds.

Kafka Streams' changelog, for our fold: each partition's exact contributions and the offset
they cover go to the compacted checkpoints topic (`_checkpoint_codec`), so an assignment
restores them and reads only the tail (`_checkpoint_read`). Writing happens on a thread of
its own (`_checkpoint_write`) from snapshots taken between batches, and synchronously when a
partition is revoked (clean shutdown included). Without the checkpoints topic (deployments
that have not run `topics create` since) the aggregator warns once and re-folds as before.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from confluent_kafka import Consumer
from confluent_kafka.admin import ConfigResource

from resultlog.consumers.aggregator._metrics import AggregatorMetrics
from resultlog.consumers.aggregator._state import Shared
from resultlog.consumers.aggregator.checkpoint._codec import RunRows
from resultlog.consumers.aggregator.checkpoint._read import (
    Bounds,
    Restored,
    Unusable,
    read_checkpoints,
)
from resultlog.consumers.aggregator.checkpoint._write import CheckpointWriter, Snapshot
from resultlog.kafka import KafkaClientError, KafkaConnection, TopicLayoutError

__all__ = ["Checkpoints", "delete_retention_ms"]

log = logging.getLogger(__name__)
_DEFAULT_DELETE_RETENTION_MS = 24 * 60 * 60 * 1000  # Kafka's default
_REVOKE_WAIT_S = 30.0


class Checkpoints:
    """Checkpoints of the partitions one consumer loop holds."""

    def __init__(
        self,
        kafka: KafkaConnection,
        metrics: AggregatorMetrics,
        partitions: int,
        count: int,
        max_age_ms: int,
    ) -> None:
        settings = kafka.settings
        self._kafka = kafka
        self._metrics = metrics
        self._partitions = partitions
        self._every_records = settings.checkpoint_every_records
        self._interval_s = settings.checkpoint_interval_s
        self._max_age_ms = max_age_ms
        self._reader = kafka.reader()
        self._writer = CheckpointWriter(
            kafka,
            partitions,
            count,
            on_written=self._written,
            on_failed=metrics.checkpoint_failures.inc,
        )
        self._covered: dict[int, tuple[int, float]] = {}  # partition -> (offset, when)
        self._log_id: tuple[str, str] | None = None

    def identify(self, log_id: tuple[str, str] | None) -> None:
        """The exact log (cluster ID, results topic ID) checkpoints are written for and must
        name to be restored (None: unknown, nothing restored)."""
        self._log_id = log_id
        self._writer.log_id = log_id

    @classmethod
    def open(
        cls,
        kafka: KafkaConnection,
        metrics: AggregatorMetrics,
        partitions: int,
        consumer: Consumer,
        max_age_ms: int,
    ) -> Checkpoints | None:
        """Checkpoints on the settings' topic, none older than `max_age_ms` restored; None (and
        one warning) if the topic does not exist."""
        topic = kafka.checkpoints_topic
        try:
            count = kafka.partition_count(topic, consumer)
        except TopicLayoutError:
            raise
        except KafkaClientError as exc:
            log.warning("no checkpoints (%s): every assignment re-reads its partition", exc)
            return None
        return cls(kafka, metrics, partitions, count, max_age_ms)

    def restore(self, bounds: dict[int, Bounds]) -> dict[int, Restored]:
        """The usable checkpoints of newly assigned partitions; the rest are said and counted."""
        if not bounds:
            return {}
        kafka = self._kafka
        found = read_checkpoints(
            self._reader,
            topic=kafka.checkpoints_topic,
            results_topic=kafka.results_topic,
            partitions=self._partitions,
            wanted=bounds,
            max_age_ms=self._max_age_ms,
            log_id=self._log_id,
        )
        restored: dict[int, Restored] = {}
        now = time.monotonic()
        for partition, item in sorted(found.items()):
            self._writer.adopt(partition, item.generation, item.stale)
            outcome = item.outcome
            if isinstance(outcome, Unusable):
                self._ignored(partition, outcome)
                self._covered[partition] = (max(bounds[partition][0], 0), now)
                continue
            restored[partition] = outcome
            self._covered[partition] = (outcome.next_offset, now)
            self._metrics.checkpoints_restored.inc()
            log.info(
                "restored %s[%d] from its checkpoint: %d records' contributions up to offset %d",
                kafka.results_topic, partition, outcome.contributions, outcome.next_offset,
            )  # fmt: skip
        return restored

    def write_due(self, shared: Shared) -> None:
        """Between batches, once every assigned partition is caught up: snapshot those with N
        new records, or new records and T seconds since their last checkpoint."""
        now = time.monotonic()
        with shared.lock:
            states = list(shared.state.partitions.values())
            # Catching up comes first: a checkpoint's snapshot and encoding would compete with
            # it for the interpreter (a revocation still checkpoints, in write_now).
            if not all(state.caught_up for state in states):
                return
            due = [
                state.partition
                for state in states
                if self._due(state.partition, state.position, now)
            ]
        self._submit(shared, due)

    def write_now(self, shared: Shared, partitions: set[int]) -> None:
        """On revocation: checkpoint these partitions' progress and wait for it."""
        with shared.lock:
            moved = [
                number
                for number in partitions
                if (state := shared.state.partitions.get(number)) is not None
                and state.position > self._covered.get(number, (0, 0.0))[0]
            ]
        self._submit(shared, moved)
        if not self._writer.wait(partitions, _REVOKE_WAIT_S):
            log.warning("checkpoints of %s not written in %gs", sorted(partitions), _REVOKE_WAIT_S)
        for number in partitions:
            self._covered.pop(number, None)

    def close(self) -> None:
        """Finish what is queued, then release the clients."""
        self._writer.close()
        self._reader.close()

    def _due(self, partition: int, position: int, now: float) -> bool:
        offset, when = self._covered.get(partition, (0, now))
        if position <= offset or self._writer.busy(partition):
            return False
        return position - offset >= self._every_records or now - when >= self._interval_s

    def _submit(self, shared: Shared, partitions: list[int]) -> None:
        started = time.perf_counter()
        snapshots = []
        with shared.lock:
            for number in partitions:
                state = shared.state.partitions.get(number)
                if state is None:
                    continue
                runs: Iterable[RunRows]
                if state.store is not None:
                    # Flushed, then read from a snapshot of the store on the writer's thread.
                    state.store.flush(state.position)
                    runs = state.store.runs()
                else:
                    runs = [(key, run.fold.contributions()) for key, run in state.runs.items()]
                snapshots.append(Snapshot(number, state.position, runs))
        self._metrics.checkpoint_snapshot_seconds.inc(time.perf_counter() - started)
        now = time.monotonic()
        for snapshot in snapshots:
            self._covered[snapshot.partition] = (snapshot.next_offset, now)
            self._writer.submit(snapshot)

    def _ignored(self, partition: int, unusable: Unusable) -> None:
        self._metrics.checkpoints_ignored.labels(reason=unusable.reason).inc()
        # A partition never checkpointed (a first start) is no fault: no warning for it.
        level = logging.INFO if unusable.reason == "missing" else logging.WARNING
        log.log(
            level,
            "ignoring the checkpoint of %s[%d] (%s): %s; reading the partition from its start",
            self._kafka.results_topic, partition, unusable.reason, unusable.detail,
        )  # fmt: skip

    def _written(self, seconds: float) -> None:
        self._metrics.checkpoints_written.inc()
        self._metrics.checkpoint_write_seconds.inc(seconds)


def delete_retention_ms(kafka: KafkaConnection) -> int:
    """How long the results topic keeps tombstones: a checkpoint must be younger."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, kafka.results_topic)
    admin = kafka.admin()
    try:
        entries = admin.describe_configs([resource], request_timeout=10.0)[resource].result(10.0)
        return int(entries["delete.retention.ms"].value)
    except Exception as exc:  # an ACL may deny DESCRIBE_CONFIGS: Kafka's default then
        log.debug("cannot read delete.retention.ms of %s: %s", kafka.results_topic, exc)
        return _DEFAULT_DELETE_RETENTION_MS
