"""Opening an assigned partition's state store: what of it may be used is `_trust`'s decision;
here it is brought up to date from its changelog (or filled from the changelog on a new
machine), or emptied to be rebuilt, and said."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from resultlog.consumers.aggregator._metrics import AggregatorMetrics
from resultlog.consumers.aggregator.store._changelog import KafkaChangelog
from resultlog.consumers.aggregator.store._meta import LogIdentity
from resultlog.consumers.aggregator.store._open import Opened, Refused, check_meta, destroy
from resultlog.consumers.aggregator.store._records import ChangelogError
from resultlog.consumers.aggregator.store._restore import restore_changelog
from resultlog.consumers.aggregator.store._store import PartitionStore
from resultlog.consumers.aggregator.store._trust import StoreSpace, Trusted, trust
from resultlog.consumers.errors import ConsumerError
from resultlog.kafka import KafkaClientError, KafkaConnection, TopicLayoutError

__all__ = ["Cancelled", "Progress", "StoreOpener"]

Progress = Callable[[int, int], None]  # changelog records read, and to read in all


class Cancelled(ConsumerError):  # noqa: N818 - a signal, not an error
    """The partition was revoked while its store was being restored."""


log = logging.getLogger(__name__)


class StoreOpener:
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
        self.changelog = _changelog(kafka)

    def open(
        self,
        partition: int,
        limits: tuple[int, int | None],
        share: int = 1,
        progress: Progress | None = None,
    ) -> tuple[Opened, LogIdentity | None]:
        """A partition's store, with its folds if usable, emptied (and said) otherwise, and
        the log it was checked against (None: unknown); `share`: stores opened together,
        which share the cache; `progress` hears how far the changelog is read."""
        identity = self._identify()
        cache_keys = max(1, self._cache_keys // share)
        space = StoreSpace(self._root, self._max_age_ms, cache_keys, self._memory_bytes)
        if identity is None:
            unknown = LogIdentity("", self._kafka.results_topic, "", self._partitions)
            found = trust(space, unknown, partition, limits, None, active=True).opened
            self._ignored(partition, "unidentified", "the results topic's ID is unknown")
            return Opened(found.store, None, {}, found.refused), None
        if self.changelog is not None:
            try:  # on every rebalance: the changelog may be another topic now
                self.changelog.identify()
            except KafkaClientError as exc:
                log.warning("cannot tell which topic %s is now: %s", self.changelog.topic, exc)
            self._fence(partition)
        trusted = trust(space, identity, partition, limits, self.changelog, active=True)
        local = trusted.local  # said even when the changelog restores the store
        if local is not None and local.reason != "missing":
            self._ignored(partition, local.reason, local.detail)
        found = self._restored(trusted, identity, limits, cache_keys, progress)
        if found.refused is not None and found.refused is not local:
            self._ignored(partition, found.refused.reason, found.refused.detail)
        elif found.refused is None:
            self._metrics.states_restored.inc()
            log.info(
                "resumed %s[%d] from %s: %d runs up to offset %s",
                self._kafka.results_topic, partition, found.store.path,
                len(found.folds), found.next_offset,
            )  # fmt: skip
        return found, identity

    def _restored(
        self,
        trusted: Trusted,
        identity: LogIdentity,
        limits: tuple[int, int | None],
        cache_keys: int,
        progress: Progress | None = None,
    ) -> Opened:
        """The store brought up to date from the changelog (from the offset it holds, or from
        the start when it holds nothing), its folds; emptied if the changelog is refused."""
        changelog, found = self.changelog, trusted.opened
        if changelog is None or trusted.span is None:
            return found
        store = found.store
        partition = store.partition
        start, high = trusted.span
        try:
            if trusted.rewrite:  # a good store its changelog lost: rewrite it
                log.warning("%s[%d] does not back %s: rewriting it", changelog.topic,
                            partition, store.path)  # fmt: skip
                changelog.clear(partition, high)
                store.republish()
                return found
            told = None if progress is None else _told(progress, start, high)
            started = time.monotonic()
            try:
                if told is not None:
                    told(start)  # revoked already (while fencing, say): closed below
                refused = self._restore(store, (start, high), identity, told)
                if refused is not None and refused.reason == "lost_records":
                    # The changelog is whole; what this store held is not: read it all.
                    self._ignored(partition, refused.reason, refused.detail)
                    store = destroy(store, cache_keys, self._memory_bytes)
                    found, start = Opened(store, None, {}, None), changelog.bounds(partition)[0]
                    refused = self._restore(store, (start, high), identity, told)
            except Cancelled:
                store.close()  # what it wrote says `restoring`: the next assignment goes on
                raise
            if high > start:
                log.info("read %s[%d] from offset %d to %d in %.1fs", changelog.topic, partition,
                         start, high, time.monotonic() - started)  # fmt: skip
            if refused is None:
                if start == high and found.next_offset is not None:
                    return found  # nothing new on the changelog: the folds stand
                refused = check_meta(store.meta(), identity, partition, limits, self._max_age_ms)
            if refused is None:
                saved = store.meta()
                assert saved is not None  # checked above
                return Opened(store, saved.next_offset, store.folds(), None, saved)
            if refused.reason == "missing":
                return Opened(store, None, {}, refused)
            changelog.clear(partition, high)
        except ChangelogError as exc:
            refused = Refused("changelog", str(exc))
        return Opened(destroy(store, cache_keys, self._memory_bytes), None, {}, refused)

    def _restore(
        self,
        store: PartitionStore,
        span: tuple[int, int],
        identity: LogIdentity,
        told: Callable[[int], None] | None,
    ) -> Refused | None:
        """Apply the changelog's offsets `span` to the store."""
        changelog, partition = self.changelog, store.partition
        assert changelog is not None  # only restores with a changelog
        return restore_changelog(
            store, lambda a, b: changelog.read(partition, a, b), span, identity,
            told, entries=lambda a, b: changelog.entries(partition, a, b),
            changelog_id=changelog.topic_id,
        )  # fmt: skip

    def _fence(self, partition: int) -> None:
        """Fence the partition's changelog before reading it: whatever its previous writer's
        producer still delivers comes after the fence, known by its tag (`_restore`)."""
        assert self.changelog is not None
        try:
            self.changelog.fence(partition)
        except ChangelogError as exc:  # the restore will likely fail too, and say so
            log.warning("cannot fence %s[%d] yet: %s", self.changelog.topic, partition, exc)

    def _identify(self) -> LogIdentity | None:
        topic = self._kafka.results_topic
        try:
            cluster_id, topic_id = self._kafka.topic_identity(topic)
        except KafkaClientError as exc:
            log.warning("cannot tell which log %s is (%s): its state is rebuilt", topic, exc)
            return None
        return LogIdentity(cluster_id, topic, topic_id, self._partitions)

    def _ignored(self, partition: int, reason: str, detail: str) -> None:
        self._metrics.states_ignored.labels(reason=reason).inc()
        # A partition never saved here (a first start) is no fault: no warning for it.
        level = logging.INFO if reason == "missing" else logging.WARNING
        log.log(
            level,
            "ignoring the saved state of %s[%d] in %s (%s): %s",
            self._kafka.results_topic, partition, self._root, reason, detail,
        )  # fmt: skip

    def close(self) -> None:
        """Release the changelog's clients."""
        if self.changelog is not None:
            self.changelog.close()


def _changelog(kafka: KafkaConnection) -> KafkaChangelog | None:
    """The changelog topic's writer and reader; None (said once) if the topic is missing."""
    try:
        kafka.partition_count(kafka.settings.changelog_topic)  # another layout: refused
        return KafkaChangelog(kafka)
    except TopicLayoutError:
        raise
    except KafkaClientError as exc:
        log.warning(
            "no changelog (%s): state is kept on this machine only; run `resultlog topics create`",
            exc,
        )
        return None


def _told(progress: Progress, start: int, end: int) -> Callable[[int], None]:
    """A restore's offset progress as records read of records to read."""
    return lambda offset: progress(offset - start, end - start)
