"""Open a partition's store and decide whether what it holds can be trusted.

A store is used only if its meta names this exact log (cluster ID, topic ID, topic, partition
count, partition), covers an offset between the partition's log start and its high
watermark, and was written within the results topic's delete.retention.ms (older, tombstones
in the tail may have been compacted away). Anything else is refused with its reason (a metric
label) and the store is emptied: it is rebuilt, never trusted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rocksdict import Rdict

from resultlog.consumers.aggregator.store._codec import StoreFormatError
from resultlog.consumers.aggregator.store._files import (
    held_elsewhere,
    move_aside,
    remove_dead_scratch,
    scratch_path,
)
from resultlog.consumers.aggregator.store._meta import LogIdentity, StoreMeta
from resultlog.consumers.aggregator.store._records import Changelog
from resultlog.consumers.aggregator.store._store import DEFAULT_MEMORY, PartitionStore, db_options
from resultlog.consumers.fold import RunFold
from resultlog.schemas import RunKey

__all__ = ["Opened", "Refused", "check_meta", "destroy", "foreign", "open_store", "partition_path"]

log = logging.getLogger(__name__)
_LOCK_WAIT_S = 5.0
_FIRST_PAUSE_S = 0.1  # doubling while another process holds the store
_MAX_PAUSE_S = 1.0


@dataclass(frozen=True)
class Refused:
    """Why a store's content is not used (`reason` is a metric label)."""

    reason: str
    detail: str


@dataclass(frozen=True)
class Opened:
    """An open store and what it restored: folds up to `next_offset`, or why nothing;
    `meta`: what the store holds (a restore from the changelog continues from it)."""

    store: PartitionStore
    next_offset: int | None
    folds: dict[RunKey, RunFold]
    refused: Refused | None
    meta: StoreMeta | None = None


def partition_path(root: Path, topic: str, partition: int) -> Path:
    """Where a results partition's store lives under the state directory."""
    return root / topic / str(partition)


def open_store(
    root: Path,
    identity: LogIdentity,
    partition: int,
    bounds: tuple[int, int | None],
    *,
    max_age_ms: int,
    cache_keys: int,
    memory_bytes: int = DEFAULT_MEMORY,
    saves_as: LogIdentity | None = None,
    changelog: Changelog | None = None,
) -> Opened:
    """The partition's store, with its folds if they can be trusted (emptied otherwise; a
    store whose restore from the changelog began is kept, without folds, to finish it); its
    flushes saved as `saves_as` (None: never as restorable) through `changelog`."""
    path = partition_path(root, identity.topic, partition)
    binding = (saves_as, changelog)

    def reopen() -> PartitionStore:
        return _open(path, partition, cache_keys, memory_bytes, binding)

    try:
        store = reopen()
    except _RocksDBRefusalError as exc:  # kept aside, the partition restored anew
        return _aside(root, path, exc, reopen)
    try:
        meta = store.meta()
        if meta is not None and meta.restoring and foreign(meta, identity, partition) is None:
            return Opened(store, None, {}, None, meta)
        refused = check_meta(meta, identity, partition, bounds, max_age_ms)
        if refused is None and meta is not None:
            store.resume(meta)
            return Opened(store, meta.next_offset, store.folds(), None, meta)
    except StoreFormatError as exc:
        refused = Refused("corrupt", str(exc))
    except Exception as exc:  # rocksdict raises plain Exceptions: a file gone, say
        store.close()
        return _aside(root, path, exc, reopen)
    if refused is not None and refused.reason == "missing" and store.empty():
        return Opened(store, None, {}, refused)
    return Opened(destroy(store, cache_keys, memory_bytes), None, {}, refused)


class _RocksDBRefusalError(StoreFormatError):
    """RocksDB refuses to open a store (corruption, missing files, another format)."""


def _aside(root: Path, path: Path, exc: Exception, reopen: Callable[[], PartitionStore]) -> Opened:
    """Move a store RocksDB refuses aside; an empty one in its place, said as corrupt."""
    aside = move_aside(root, path)
    return Opened(reopen(), None, {}, Refused("corrupt", f"{exc}; moved aside to {aside}"))


def destroy(
    store: PartitionStore, cache_keys: int, memory_bytes: int = DEFAULT_MEMORY
) -> PartitionStore:
    """Close and delete a store; the empty store opened in its place, saved as it was."""
    store.close()
    Rdict.destroy(str(store.path), db_options())
    binding = (store.identity, store.changelog)
    return _open(store.path, store.partition, cache_keys, memory_bytes, binding)


def foreign(meta: StoreMeta, identity: LogIdentity, partition: int) -> Refused | None:
    """Why state saved from `meta`'s log is not of this partition of this log, if it is not."""
    theirs = meta.identity
    if theirs.cluster_id != identity.cluster_id:
        return Refused("foreign_cluster", f"saved from cluster {theirs.cluster_id!r}")
    if (theirs.topic, theirs.topic_id) != (identity.topic, identity.topic_id):
        return Refused(
            "foreign_topic", f"saved from {theirs.topic} with topic ID {theirs.topic_id}"
        )
    if theirs.partitions != identity.partitions or meta.partition != partition:
        return Refused(
            "foreign_layout", f"saved for partition {meta.partition} of {theirs.partitions}"
        )
    return None


def check_meta(
    meta: StoreMeta | None,
    identity: LogIdentity,
    partition: int,
    bounds: tuple[int, int | None],
    max_age_ms: int,
) -> Refused | None:
    """Why a store holding `meta` cannot be trusted for this partition now, if it cannot."""
    if meta is None:
        return Refused("missing", "no state was saved here")
    if meta.restoring:
        return Refused("interrupted", "a restore from the changelog did not finish")
    refused = foreign(meta, identity, partition)
    if refused is not None:
        return refused
    low, high = bounds
    if high is None or meta.next_offset > high:
        return Refused("beyond_end", f"it covers offsets up to {meta.next_offset}, past {high}")
    if meta.next_offset < low:
        return Refused("truncated", f"it covers offsets up to {meta.next_offset}, below {low}")
    if meta.written_at_ms < int(time.time() * 1000) - max_age_ms:
        return Refused(
            "stale",
            "saved longer ago than the results topic's delete.retention.ms: "
            "tombstones after it may be gone",
        )
    return None


def _open(
    path: Path,
    partition: int,
    cache_keys: int,
    memory_bytes: int,
    binding: tuple[LogIdentity | None, Changelog | None],
) -> PartitionStore:
    """Open (creating) the database, its flushes saved as `binding` says (identity,
    changelog); a private copy if another process holds it too long."""
    identity, changelog = binding
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_dead_scratch(path)
    deadline = time.monotonic() + _LOCK_WAIT_S
    pause = _FIRST_PAUSE_S
    while True:
        # Never open a database another process holds: RocksDB renames the holder's LOG
        # (to LOG.old.*) before it finds the lock, once per try.
        if not held_elsewhere(path):
            try:
                db = Rdict(str(path), db_options(memory_bytes))
                return PartitionStore(
                    db, path, partition, cache_keys, identity=identity, changelog=changelog
                )
            except Exception as exc:  # rocksdict raises plain Exceptions: a held lock too
                if "lock" not in str(exc).lower():
                    raise _RocksDBRefusalError(f"RocksDB refuses {path}: {exc}") from exc
        if time.monotonic() >= deadline:
            private = scratch_path(path)
            log.warning("%s is in use by another process; folding into %s", path, private)
            db = Rdict(str(private), db_options(memory_bytes))
            store = PartitionStore(
                db, private, partition, cache_keys, identity=identity, changelog=changelog
            )
            store.scratch = True
            return store
        time.sleep(pause)
        pause = min(pause * 2, _MAX_PAUSE_S)
