"""Restore a partition's store from its changelog: every complete flush after the offset the
store holds, written in batches; the keys of an interrupted last flush are repaired."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from resultlog.consumers.aggregator.store._changelog import (
    ChangelogRecord,
    Entries,
    find_tail,
)
from resultlog.consumers.aggregator.store._codec import (
    LATEST,
    META,
    SAMPLES,
    TOTALS,
    StoreFormatError,
    decode_totals,
)
from resultlog.consumers.aggregator.store._open import Refused, foreign
from resultlog.consumers.aggregator.store._store import LogIdentity, PartitionStore, StoreMeta

__all__ = ["Read", "restore_changelog"]

Read = Callable[[int, int], Iterable[ChangelogRecord]]
_BATCH = 20_000  # entries per write batch
_TAIL_WINDOW = 2 * 4096 + 64  # offsets a flush spans at most (entries, totals, its marker)


def restore_changelog(
    store: PartitionStore,
    read: Read,
    span: tuple[int, int],
    identity: LogIdentity,
    progress: Callable[[int], None] | None = None,
) -> Refused | None:
    """Apply the complete flushes of changelog offsets [start, end) to the store; why the
    changelog cannot be used (then the store holds garbage: the caller empties it)."""
    start, end = span
    if end <= start:
        return None
    tail = find_tail(read, start, end, _TAIL_WINDOW)
    if tail.marker is None:
        refused = _lost(store, tail.after)
        store.repair(tail.after)
        return refused
    try:
        last = StoreMeta.decode(tail.marker.value or b"")
    except StoreFormatError as exc:
        return Refused("corrupt", f"an undecodable changelog marker: {exc}")
    refused = foreign(last, identity, store.partition)
    if refused is not None:
        return refused
    during = dataclasses.replace(last, changelog_offset=start, restoring=True)
    entries: Entries = []
    for offset, key, value in read(start, tail.marker.offset + 1):
        if key != META:
            entries.append((key, value))
        if len(entries) >= _BATCH:
            store.write_restored(entries, during)
            entries = []
            if progress is not None:
                progress(offset + 1)
    store.write_restored(
        entries, dataclasses.replace(last, changelog_offset=tail.marker.offset + 1)
    )
    if progress is not None:
        progress(end)
    refused = _lost(store, tail.after)
    store.repair(tail.after)
    return refused


def _lost(store: PartitionStore, suspects: Iterable[bytes]) -> Refused | None:
    """Whether a run whose keys an interrupted flush wrote lost an entry to compaction: its
    entries no longer number what its totals say."""
    for run in sorted({_run_of(key) for key in suspects}):
        raw = store.read(TOTALS + run)
        latest = samples = 0
        if raw is not None:
            try:
                state, latest = decode_totals(raw)
            except StoreFormatError as exc:
                return Refused("corrupt", str(exc))
            samples = state.answered + state.skipped
        held = (_count(store, LATEST + run + b"\x00"), _count(store, SAMPLES + run + b"\x00"))
        if held != (latest, samples):
            return Refused(
                "lost", f"a run holds {held} entries, its totals say {(latest, samples)}"
            )
    return None


def _run_of(key: bytes) -> bytes:
    """The encoded run key of a store key (totals, latest or samples)."""
    end = key.find(b"\x00")
    return key[1:] if end < 0 else key[1:end]


def _count(store: PartitionStore, prefix: bytes) -> int:
    return sum(1 for _ in store.items(prefix))
