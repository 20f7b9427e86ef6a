"""Whether a partition's saved store may be used: the one decision, for the active restore and
the standby alike.

The store is opened and its meta checked (`open_store`: this exact log, offsets within the
partition's, young enough); then it is judged against its changelog: a store whose changelog
offset that changelog does not back (another changelog topic, or offsets it no longer holds)
is not restored from it. An active store that is good as it is keeps its folds and is written
whole to the changelog; any other is emptied and restored from the changelog's start. So is
a store saved longer ago than the changelog keeps tombstones (its own delete.retention.ms, as
the broker says) when the changelog holds flushes after it: compaction may have removed the
deletes (a purge) among them. What is kept is restored from the changelog offset it holds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from resultlog.consumers.aggregator.store._changelog import KafkaChangelog
from resultlog.consumers.aggregator.store._meta import LogIdentity, StoreMeta
from resultlog.consumers.aggregator.store._open import Opened, Refused, destroy, open_store
from resultlog.consumers.aggregator.store._records import ChangelogError
from resultlog.consumers.aggregator.store._store import DEFAULT_MEMORY

__all__ = ["StoreSpace", "Trusted", "trust"]


@dataclass(frozen=True)
class StoreSpace:
    """Where and how an instance keeps its stores."""

    root: Path  # the state directory
    max_age_ms: int  # saved longer ago than this, a store is not trusted
    cache_keys: int  # entries a store's memory holds
    memory_bytes: int = DEFAULT_MEMORY  # RocksDB's block cache and memtables, shared


@dataclass(frozen=True)
class Trusted:
    """A partition's store as judged: `opened` (its folds if it is usable as it is); the
    changelog offsets to restore it from (None: none, no changelog or it could not be read);
    `rewrite`: good as it is, but its changelog does not back it (write it there whole);
    `local`: why its own content was refused, if it was."""

    opened: Opened
    span: tuple[int, int] | None
    rewrite: bool
    local: Refused | None


def trust(
    space: StoreSpace,
    identity: LogIdentity,
    partition: int,
    bounds: tuple[int, int | None],
    changelog: KafkaChangelog | None,
    *,
    active: bool,
) -> Trusted:
    """Open the partition's store and decide what of it may be used (`bounds`: the results
    partition's watermarks); an active store's flushes are saved as `identity` (unless its
    topic ID is unknown, "") through the changelog, a standby's never flush. A standby's
    changelog failure is raised (ChangelogError), its store closed."""
    saves = active and bool(identity.topic_id)
    found = open_store(
        space.root, identity, partition, bounds,
        max_age_ms=space.max_age_ms, cache_keys=space.cache_keys,
        memory_bytes=space.memory_bytes,
        saves_as=identity if saves else None, changelog=changelog if saves else None,
    )  # fmt: skip
    local = found.refused
    if changelog is None:
        return Trusted(found, None, False, local)
    store, meta = found.store, found.meta
    try:
        low, high = changelog.bounds(partition)
    except ChangelogError as exc:
        if not active:
            store.close()
            raise
        emptied = destroy(store, space.cache_keys, space.memory_bytes)
        return Trusted(
            Opened(emptied, None, {}, Refused("changelog", str(exc))), None, False, local
        )
    if meta is not None and not meta.backed_by(changelog.topic_id, low, high):
        if active and found.next_offset is not None:
            return Trusted(found, (high, high), True, local)
        store, meta = destroy(store, space.cache_keys, space.memory_bytes), None
        found = Opened(store, None, {}, found.refused)
    elif meta is not None and meta.changelog_offset < high and _outlived(meta, changelog):
        local = Refused(
            "stale_changelog",
            f"saved longer ago than {changelog.topic}'s delete.retention.ms "
            f"({changelog.delete_retention_ms} ms): deletes after it may be compacted away",
        )
        store, meta = destroy(store, space.cache_keys, space.memory_bytes), None
        found = Opened(store, None, {}, local)
    start = low if meta is None else meta.changelog_offset
    return Trusted(found, (start, high), False, local)


def _outlived(meta: StoreMeta, changelog: KafkaChangelog) -> bool:
    """Whether the store was saved longer ago than the changelog keeps tombstones."""
    return meta.written_at_ms < int(time.time() * 1000) - changelog.delete_retention_ms
