"""The consumer loop's state stores: open each assigned partition's, trusted only if it is
provably this log's, else filled from a checkpoint or rebuilt (see `store`)."""

from __future__ import annotations

import logging
from pathlib import Path

from resultlog.consumers.aggregator._metrics import AggregatorMetrics
from resultlog.consumers.aggregator.store import LogIdentity, Opened, PartitionStore, open_store
from resultlog.consumers.fold import Contribution, RunFold
from resultlog.kafka import KafkaClientError, KafkaConnection
from resultlog.schemas import RunKey

__all__ = ["Stores"]

log = logging.getLogger(__name__)


class Stores:
    """Opens the state stores of newly assigned partitions under one state directory."""

    def __init__(
        self,
        kafka: KafkaConnection,
        metrics: AggregatorMetrics,
        partitions: int,
        *,
        root: Path,
        max_age_ms: int,
    ) -> None:
        self._kafka = kafka
        self._metrics = metrics
        self._partitions = partitions
        self._root = root
        self._max_age_ms = max_age_ms
        self._cache_keys = kafka.settings.aggregator_cache_keys
        self._memory_bytes = kafka.settings.aggregator_store_memory_mb << 20
        self.identity: LogIdentity | None = None

    def open(self, bounds: dict[int, tuple[int, int | None]]) -> dict[int, Opened]:
        """Each partition's store: with its folds if usable, emptied (and said) otherwise."""
        if not bounds:
            return {}
        identity = self._identify()
        cache_keys = max(1, self._cache_keys // max(1, len(bounds)))
        opened: dict[int, Opened] = {}
        for partition, limits in sorted(bounds.items()):
            found = open_store(
                self._root,
                identity or LogIdentity("", self._kafka.results_topic, "", self._partitions),
                partition,
                limits,
                max_age_ms=self._max_age_ms,
                cache_keys=cache_keys,
                memory_bytes=self._memory_bytes,
            )
            found.store.identity = identity  # None: never saved as restorable
            if identity is None:
                found = Opened(found.store, None, {}, found.refused)
                self._ignored(partition, "unidentified", "the results topic's ID is unknown")
            elif found.refused is not None:
                self._ignored(partition, found.refused.reason, found.refused.detail)
            else:
                self._metrics.states_restored.inc()
                log.info(
                    "resumed %s[%d] from %s: %d runs up to offset %s",
                    self._kafka.results_topic, partition, found.store.path, len(found.folds),
                    found.next_offset,
                )  # fmt: skip
            opened[partition] = found
        return opened

    @staticmethod
    def fill(
        store: PartitionStore, rows: dict[RunKey, list[Contribution]], next_offset: int
    ) -> dict[RunKey, RunFold]:
        """Fold a checkpoint's contributions into an empty store; each run's fold."""
        moved = {run_key: store.restore_fold(run_key, items) for run_key, items in rows.items()}
        store.flush(next_offset)
        return moved

    def _identify(self) -> LogIdentity | None:
        topic = self._kafka.results_topic
        try:
            cluster_id, topic_id = self._kafka.topic_identity(topic)
        except KafkaClientError as exc:
            log.warning("cannot tell which log %s is (%s): its state is rebuilt", topic, exc)
            self.identity = None
            return None
        self.identity = LogIdentity(cluster_id, topic, topic_id, self._partitions)
        return self.identity

    def _ignored(self, partition: int, reason: str, detail: str) -> None:
        self._metrics.states_ignored.labels(reason=reason).inc()
        # A partition never saved here (a first start) is no fault: no warning for it.
        level = logging.INFO if reason == "missing" else logging.WARNING
        log.log(
            level,
            "ignoring the saved state of %s[%d] in %s (%s): %s",
            self._kafka.results_topic, partition, self._root, reason, detail,
        )  # fmt: skip
