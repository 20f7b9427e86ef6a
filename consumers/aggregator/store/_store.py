"""One results partition's fold state on disk (RocksDB), with a bounded cache of hot keys.

Writes are buffered in memory and flushed in one atomic write batch together with the offset
they cover (`next_offset`), so the store always holds the state of a prefix of the partition:
a SIGKILL at any moment leaves the last flushed prefix, and the tail is read again. Memory
holds each run's totals, the unflushed entries (at most `cache_keys` past a record boundary)
and at most `cache_keys` clean ones, least recently used first out.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from rocksdict import (
    BlockBasedOptions,
    Cache,
    Options,
    Rdict,
    RdictIter,
    WriteBatch,
    WriteBufferManager,
)

from resultlog.consumers.aggregator.store._codec import (
    LATEST,
    META,
    SAMPLES,
    TOTALS,
    StoreFormatError,
    decode_contribution,
    decode_totals,
    encode_contribution,
    encode_sample,
    encode_totals,
    run_of_totals,
    run_prefix,
    totals_key,
)
from resultlog.consumers.aggregator.store._maps import LatestMap, SampleMap
from resultlog.consumers.fold import Contribution, RunFold
from resultlog.schemas import RunKey

__all__ = ["DEFAULT_MEMORY", "FORMAT", "LogIdentity", "PartitionStore", "StoreMeta"]

log = logging.getLogger(__name__)
FORMAT = 2  # 2: a contribution holds its shape's selected samples
_V = TypeVar("_V")
_MISSING: Any = object()
_ABSENT: Any = None  # a key known to hold nothing (cached misses and pending deletes)
_RESTORE_BATCH = 20_000  # entries per write batch when restoring a checkpoint's run


@dataclass(frozen=True)
class LogIdentity:
    """The exact log a piece of state comes from: cluster, topic (by id), partition count."""

    cluster_id: str
    topic: str
    topic_id: str
    partitions: int


@dataclass(frozen=True)
class StoreMeta:
    """What a store says it holds: whose partition, up to which offset, written when."""

    format: int
    identity: LogIdentity
    partition: int
    next_offset: int
    written_at_ms: int

    def encode(self) -> bytes:
        """The meta entry's bytes."""
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> StoreMeta:
        """The meta entry; StoreFormatError if it is not one this version writes."""
        try:
            body = json.loads(raw)
            identity = LogIdentity(**body.pop("identity"))
            meta = cls(identity=identity, **body)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise StoreFormatError(f"an undecodable meta entry: {exc!r}") from exc
        if meta.format != FORMAT:
            raise StoreFormatError(f"format {meta.format}, this version reads {FORMAT}")
        return meta


DEFAULT_MEMORY = 64 << 20


@functools.cache
def _shared(memory_bytes: int) -> tuple[Cache, WriteBufferManager]:
    """One LRU block cache per process for every store, their memtables charged to it."""
    cache = Cache(memory_bytes)
    return cache, WriteBufferManager.new_write_buffer_manager_with_cache(
        memory_bytes // 2, False, cache
    )


def db_options(memory_bytes: int = DEFAULT_MEMORY) -> Options:
    """Options whose memory does not grow with the data: small memtables, and blocks, index
    and filters all in the one shared cache of `memory_bytes` (else each table file's index
    stays in memory: memory growing with the partition)."""
    cache, manager = _shared(memory_bytes)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    options.set_write_buffer_size(min(4 << 20, memory_bytes // 16))
    options.set_max_write_buffer_number(2)
    options.set_max_open_files(64)
    options.set_write_buffer_manager(manager)
    table = BlockBasedOptions()
    table.set_block_cache(cache)
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    table.set_bloom_filter(10, False)
    options.set_block_based_table_factory(table)
    return options


class PartitionStore:
    """The disk-backed per-key state of one results partition's runs."""

    def __init__(self, db: Rdict, path: Path, partition: int, cache_keys: int) -> None:
        self.path = path
        self.partition = partition
        self.identity: LogIdentity | None = None  # what every flush's meta names
        self._db = db
        self._limit = max(cache_keys, 1)
        self._clean: OrderedDict[bytes, Any] = OrderedDict()
        self._dirty: dict[bytes, Any] = {}
        self._dirty_under: dict[bytes, set[bytes]] = {}  # map prefix -> its pending keys
        # Map prefixes with nothing on disk that is not also in memory (a run new here, none
        # of its flushed entries evicted since): a miss there is a miss, no disk read.
        self._fresh: set[bytes] = set()
        self._unsaved: dict[RunKey, RunFold] = {}
        self.scratch = False  # a private copy (the shared one was locked): removed on close
        self.flushed_at = time.monotonic()
        self.covers: int | None = None  # the offset the meta on disk names

    # -- what the maps call -----------------------------------------------------------------

    def load(self, key: bytes, decode: Callable[[bytes], _V], prefix: bytes) -> _V | None:
        """The value under `key` (of a map's `prefix`), from the pending writes, the cache or
        the disk."""
        value = self._dirty.get(key, _MISSING)
        if value is not _MISSING:
            return value  # type: ignore[no-any-return]
        clean = self._clean
        value = clean.get(key, _MISSING)
        if value is not _MISSING:
            clean.move_to_end(key)
            return value  # type: ignore[no-any-return]
        if prefix in self._fresh:
            return _ABSENT  # type: ignore[no-any-return]
        raw = self._db.get(key)
        value = _ABSENT if raw is None else decode(raw)
        clean[key] = value
        self._trim()
        return value

    def save(self, key: bytes, value: object, prefix: bytes) -> bool:
        """Set (None: delete) `key` (under a map's `prefix`), in memory until the next flush;
        whether it held a value before."""
        held = self._dirty.get(key, _MISSING)
        if held is _MISSING:
            held = self._clean.get(key, _MISSING)
        if held is _MISSING:  # not read before: the fold's get-then-set always reads first
            held = _ABSENT if prefix in self._fresh else self._db.get(key)
        self._dirty[key] = value
        under = self._dirty_under.get(prefix)
        if under is None:
            under = self._dirty_under[prefix] = set()
        under.add(key)
        return held is not None

    def scan(self, prefix: bytes, decode: Callable[[bytes], _V]) -> list[tuple[bytes, _V]]:
        """Every (key, value) under `prefix`, pending writes included."""
        found: dict[bytes, Any] = {}
        for key, raw in self._items(prefix):
            found[key] = raw
        dirty = self._dirty
        for key in self._dirty_under.get(prefix, ()):
            found[key] = dirty[key]
        out = []
        for key, held in found.items():
            value = decode(held) if isinstance(held, bytes) else held
            if value is not None:
                out.append((key, value))
        return out

    # -- what the aggregator state calls ----------------------------------------------------

    def new_fold(self, run_key: RunKey) -> RunFold:
        """An empty fold of a run whose per-key state lives here."""
        latest = LatestMap(self, run_prefix(LATEST, run_key))
        samples = SampleMap(self, run_prefix(SAMPLES, run_key))
        for prefix in (latest.prefix, samples.prefix):
            if next(iter(self._items(prefix)), None) is None:
                self._fresh.add(prefix)
        return RunFold(run_key, latest, samples.emptied())

    def touched(self, fold: RunFold) -> None:
        """The fold changed: save its totals at the next flush."""
        self._unsaved[fold.run_key] = fold

    @property
    def pending(self) -> int:
        """Entries written since the last flush."""
        return len(self._dirty)

    @property
    def full(self) -> bool:
        """Whether the pending writes reached the cache's size: flush at the next boundary."""
        return len(self._dirty) >= self._limit

    def flush(self, next_offset: int | None) -> None:
        """Write the pending entries and changed totals in one batch, with the offset they
        cover (None while the store is being filled from a checkpoint: no meta yet)."""
        batch = WriteBatch(raw_mode=True)
        for key, value in self._dirty.items():
            if value is None:
                batch.delete(key)
            elif key.startswith(LATEST):
                batch.put(key, encode_contribution(value))
            else:
                batch.put(key, encode_sample(value))
        for run_key, fold in self._unsaved.items():
            if len(fold):
                batch.put(totals_key(run_key), encode_totals(fold.state(), len(fold)))
            else:
                batch.delete(totals_key(run_key))
        if next_offset is not None and self.identity is not None:
            now_ms = int(time.time() * 1000)
            meta = StoreMeta(FORMAT, self.identity, self.partition, next_offset, now_ms)
            batch.put(META, meta.encode())
            self.covers = next_offset
        self._db.write(batch)
        clean = self._clean
        for key, value in self._dirty.items():
            clean[key] = value
            clean.move_to_end(key)
        self._trim()
        self._dirty.clear()
        self._dirty_under.clear()
        self._unsaved.clear()
        self.flushed_at = time.monotonic()

    def meta(self) -> StoreMeta | None:
        """The meta entry on disk (StoreFormatError if it does not decode)."""
        raw = self._db.get(META)
        return None if raw is None else StoreMeta.decode(raw)

    def empty(self) -> bool:
        """Whether the store holds nothing at all."""
        return next(iter(self._items(b"")), None) is None

    def folds(self) -> dict[RunKey, RunFold]:
        """Every run's fold, resumed from its saved totals (StoreFormatError if one is bad)."""
        folds: dict[RunKey, RunFold] = {}
        for key, raw in self._items(TOTALS):
            run_key = run_of_totals(key)
            state, latest_count = decode_totals(raw)
            latest = LatestMap(self, run_prefix(LATEST, run_key), latest_count)
            samples = SampleMap(self, run_prefix(SAMPLES, run_key), None)
            folds[run_key] = RunFold.resume(run_key, state, latest, samples.emptied(), samples)
        return folds

    def fold_until_full(
        self, fold: RunFold, items: Sequence[tuple[int, Contribution]], start: int
    ) -> int:
        """Apply the contributions of items[start:] (offset, contribution) to `fold`, one of
        this store's, until the pending writes fill the cache; the index after the last."""
        index, count, limit = start, len(items), self._limit
        while index < count:
            fold.apply(items[index][1])
            index += 1
            if len(self._dirty) >= limit:
                break
        return index

    def restore_fold(self, run_key: RunKey, contributions: list[Contribution]) -> RunFold:
        """A fold here holding these contributions (a checkpoint's): folded in memory, its
        entries and totals written straight to disk, without an offset (the caller's flush
        names one), and the fold resumed from them."""
        folded = RunFold.restore(run_key, contributions)
        latest = LatestMap(self, run_prefix(LATEST, run_key), len(folded))
        samples = SampleMap(self, run_prefix(SAMPLES, run_key), None)
        batch = WriteBatch(raw_mode=True)
        for item in folded.contributions():
            batch.put(latest.store_key(item.key), encode_contribution(item))
            if len(batch) >= _RESTORE_BATCH:
                self._db.write(batch)
                batch = WriteBatch(raw_mode=True)
        for sample_id, sample in folded.per_sample().items():
            batch.put(samples.store_key(sample_id), encode_sample(sample))
        state = folded.state()
        if len(folded):
            batch.put(totals_key(run_key), encode_totals(state, len(folded)))
        self._db.write(batch)
        return RunFold.resume(run_key, state, latest, samples.emptied(), samples)

    def runs(self) -> Iterator[tuple[RunKey, list[Contribution]]]:
        """Each run's latest contributions as last flushed, read from a snapshot taken now."""
        snapshot = self._db.snapshot()

        def read() -> Iterator[tuple[RunKey, list[Contribution]]]:
            for key, _ in _prefixed(snapshot.iter(), TOTALS):
                run_key = run_of_totals(key)
                prefix = run_prefix(LATEST, run_key)
                items = _prefixed(snapshot.iter(), prefix)
                yield run_key, [decode_contribution(raw) for _, raw in items]

        return read()

    def close(self) -> None:
        """Release the database (a scratch copy is removed)."""
        self._db.close()
        if self.scratch:
            Rdict.destroy(str(self.path), db_options())
        self._clean.clear()
        self._dirty.clear()
        self._dirty_under.clear()

    def _trim(self) -> None:
        """Evict the least recently used clean entries down to the cache's size."""
        clean, fresh = self._clean, self._fresh
        while len(clean) > self._limit:
            key, value = clean.popitem(last=False)
            if value is not None and fresh:  # now on disk only: its map's misses read the disk
                fresh.discard(key[: key.index(b"\x00") + 1])

    def _items(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        return _prefixed(self._db.iter(), prefix)


def _prefixed(it: RdictIter, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    it.seek(prefix)
    while it.valid():
        key = it.key()
        if not key.startswith(prefix):
            return
        yield key, it.value()
        it.next()


def scratch_path(path: Path) -> Path:
    """A private directory beside `path` for when `path` is locked by another process."""
    return path.with_name(f"{path.name}.scratch-{os.getpid()}-{uuid.uuid4().hex[:8]}")
