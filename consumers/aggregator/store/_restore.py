"""Restore a partition's store from its changelog: every complete flush after the offset the
store holds, written in batches; the keys of an interrupted last flush are repaired."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import threading
from collections.abc import Callable, Iterable, Iterator

from resultlog.consumers.aggregator.store._codec import (
    LATEST,
    SAMPLES,
    TOTALS,
    StoreFormatError,
    decode_totals,
    untagged,
)
from resultlog.consumers.aggregator.store._meta import GENERATION_KEY, LogIdentity, StoreMeta
from resultlog.consumers.aggregator.store._open import Refused, foreign
from resultlog.consumers.aggregator.store._records import (
    ChangelogRecord,
    Entries,
    Tail,
    find_tail,
)
from resultlog.consumers.aggregator.store._store import PartitionStore

__all__ = ["Read", "ReadEntries", "restore_changelog"]

Read = Callable[[int, int], Iterable[ChangelogRecord]]
# Lists of (key, value) of offsets [start, end), each with the offset after its last record.
ReadEntries = Callable[[int, int], Iterable[tuple[int, Entries]]]
_BATCH = 20_000  # entries per write batch
_TAIL_WINDOW = 2 * 4096 + 64  # offsets a flush spans at most (entries, totals, its marker)


def restore_changelog(
    store: PartitionStore,
    read: Read,
    span: tuple[int, int],
    identity: LogIdentity,
    progress: Callable[[int], None] | None = None,
    *,
    entries: ReadEntries | None = None,
    changelog_id: str | None = None,
) -> Refused | None:
    """Apply the complete flushes of changelog offsets [start, end) to the store (`entries`:
    a faster read of the same records, in lists; `changelog_id`: the topic read, which its
    flushes must name); why the changelog cannot be used (then the store holds garbage: the
    caller empties it). The store must end holding the generation marker its last flush
    names: read from where it starts, the changelog holds that generation's whole state.
    A store that held state before the read must see every offset of it: compaction takes
    a tombstone (a purge) and the values it deleted together, so a record missing from what
    it reads may be a delete it never applies (reason `lost_records`: restore it whole).
    Records a fenced-off writer wrote late, that nothing after them replaces, are refused
    (reason `fenced`: the changelog is rebuilt)."""
    start, end = span
    if end <= start:
        return None
    tail = find_tail(read, start, end, _TAIL_WINDOW)
    # Only fences after the marker: the store may hold every offset up to the end.
    fenced = None if tail.after else tail.writer_after
    if tail.marker is None:
        if fenced is not None:
            _past_fences(store, end, fenced)
            return None
        refused = _lost(store, tail.after)
        store.repair(tail.after)
        return refused
    try:
        last = StoreMeta.decode(tail.marker.value or b"")
    except StoreFormatError as exc:
        return Refused("corrupt", f"an undecodable changelog marker: {exc}")
    refused = foreign(last, identity, store.partition)
    if refused is None and changelog_id is not None and last.changelog_id != changelog_id:
        refused = Refused(
            "foreign_changelog", f"its flushes name changelog topic ID {last.changelog_id!r}"
        )
    if refused is not None:
        return refused
    stop = tail.marker.offset + 1
    incremental = not store.empty()
    saved = _saved_meta(store) if incremental else None
    writer = bytes.fromhex(saved.writer) if saved is not None and saved.writer else None
    # An interrupted restore goes on from `start`, knowing whose records come there.
    during = dataclasses.replace(
        last, changelog_offset=start, restoring=True, writer="" if writer is None else writer.hex()
    )
    late: set[bytes] = set()  # keys a fenced-off writer wrote last
    count = 0
    # Each list is written once the next one is read: the last goes with the final meta, so
    # a restore of one list (a short tail) is one durable write, as a flush is. The markers
    # are written too: the meta each write ends with overwrites them.
    held: Entries = []
    held_to = start
    with _COLLECTOR.held():
        for reached, tagged in (entries or _in_lists(read))(start, stop):
            batch, writer = untagged(tagged, writer, late)
            if held:
                store.write_restored(held, during)
                if progress is not None:
                    progress(held_to)
            held, held_to = batch, reached
            count += len(tagged)  # fences too: every offset read counts
        missing = stop - start - count if incremental else 0
        refused = (
            _skipped(missing, start, stop)
            or _fenced(late)
            or _partial(last, held, store, tail, start)
        )
        if refused is not None:
            store.write_restored(held, during)  # never trusted: its meta says `restoring`
            return refused
        if fenced is not None:
            last, stop = dataclasses.replace(last, writer=fenced.hex()), end
        store.write_restored(held, dataclasses.replace(last, changelog_offset=stop))
    if progress is not None:
        progress(end)
    refused = _lost(store, tail.after) or _vanished(store, last)
    store.repair(tail.after)
    return refused


class _Collector:
    """Python's cyclic garbage collector, held back while any restore runs (one hold for
    every restore thread; left off if it was off when the first began).

    A restore's records make no cycles, yet the collections their allocations start walk
    every message and entry held: about a sixth of six restores' CPU.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holders = 0
        self._reenable = False

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Hold the collector back for the block."""
        with self._lock:
            if self._holders == 0:
                self._reenable = gc.isenabled()
                gc.disable()
            self._holders += 1
        try:
            yield
        finally:
            with self._lock:
                self._holders -= 1
                if self._holders == 0 and self._reenable:
                    gc.enable()


_COLLECTOR = _Collector()


def _in_lists(read: Read) -> ReadEntries:
    """`read`'s records as lists of (key, value) of _BATCH."""

    def lists(start: int, end: int) -> Iterator[tuple[int, Entries]]:
        batch: Entries = []
        for offset, key, value in read(start, end):
            batch.append((key, value))
            if len(batch) >= _BATCH:
                yield offset + 1, batch
                batch = []
        if batch:
            yield end, batch

    return lists


def _skipped(missing: int, start: int, stop: int) -> Refused | None:
    """Why a store that held state may not take a read that skipped offsets."""
    if missing <= 0:
        return None
    return Refused(
        "lost_records",
        f"{missing} of changelog offsets {start} to {stop} are compacted away, deletes "
        "among them maybe",
    )


def _past_fences(store: PartitionStore, end: int, writer: bytes) -> None:
    """A store that holds every flush before a read of fences only now holds it all."""
    meta = _saved_meta(store)
    if meta is not None and not meta.restoring:
        past = dataclasses.replace(meta, changelog_offset=end, writer=writer.hex())
        store.write_restored([], past)


def _saved_meta(store: PartitionStore) -> StoreMeta | None:
    """The store's meta (None: none, or one this version cannot read)."""
    try:
        return store.meta()
    except StoreFormatError:
        return None


def _fenced(late: set[bytes]) -> Refused | None:
    """Why records a fenced-off writer left may not be used."""
    if not late:
        return None
    return Refused(
        "fenced",
        f"{len(late)} keys were last written by a writer fenced off before (its writes "
        "arrived late)",
    )


def _partial(
    last: StoreMeta, held: Entries, store: PartitionStore, tail: Tail, start: int
) -> Refused | None:
    """Why the read does not hold the whole state of its last flush's generation."""
    generation = last.generation.encode()
    if last.generation and generation in (_generation(held, store), tail.generation_after):
        return None
    return Refused(
        "no_generation",
        f"no whole state of generation {last.generation!r} from changelog offset {start} "
        "(a partial generation)",
    )


def _generation(held: Entries, store: PartitionStore) -> bytes | None:
    """The generation marker's value once `held` is written over the store."""
    for key, value in reversed(held):
        if key == GENERATION_KEY:
            return value
    return store.read(GENERATION_KEY)


def _lost(store: PartitionStore, suspects: Iterable[bytes]) -> Refused | None:
    """Whether a run whose keys an interrupted flush wrote lost an entry to compaction: its
    entries no longer number what its totals say."""
    runs = {_run_of(key) for key in suspects if key[:1] != b"\x00"}  # not a marker
    for run in sorted(runs):
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


def _vanished(store: PartitionStore, last: StoreMeta) -> Refused | None:
    """Whether a whole run the last flush held is gone: every key of it, its totals too,
    rewritten by an interrupted flush and its older values compacted away (what `_lost`
    cannot see: no totals left to count against)."""
    held = _count(store, TOTALS)
    if held < last.runs:
        return Refused("lost", f"{held} runs hold totals, the last flush held {last.runs}")
    return None


def _run_of(key: bytes) -> bytes:
    """The encoded run key of a store key (totals, latest or samples)."""
    end = key.find(b"\x00")
    return key[1:] if end < 0 else key[1:end]


def _count(store: PartitionStore, prefix: bytes) -> int:
    return sum(1 for _ in store.items(prefix))
