"""One results partition's fold state on disk (RocksDB), with a bounded cache of hot keys.

Writes are buffered in memory and flushed in one atomic write batch together with the offset
they cover (`next_offset`), so the store always holds the state of a prefix of the partition:
a SIGKILL at any moment leaves a flushed prefix, and the tail is read again. A flush
goes to the changelog first and to disk once the changelog acknowledged it; the consumer
thread does not wait for that: one flush is in flight while the next fills, memory holding
its values, and a next flush due meanwhile waits for it to land while the thread folds on
(until four times a flush's keys are pending). Nothing a changelog backs goes through
RocksDB's write-ahead log (the changelog is its log, as in Kafka Streams): memtables reach the
disk in write order, at least every minute, so a kill leaves an older prefix whose rest the
opener restores from the changelog. A restore's batches say `restoring`, and the meta that
ends it is written once they are on disk: nothing half written is ever trusted. Memory holds
each run's totals, the unflushed changes (a flush is due at 4,096 keys, or `cache_keys` if
fewer) and about `cache_keys` flushed entries: measured every `cache_keys / 4` flushed keys,
the maps changed least recently lose theirs first.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
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
    WriteOptions,
)

from resultlog.consumers.aggregator.store._codec import (
    LATEST,
    META,
    SAMPLES,
    TOTALS,
    decode_totals,
    encode_totals,
    run_of_totals,
    run_prefix,
    totals_key,
)
from resultlog.consumers.aggregator.store._files import OPEN_PATHS
from resultlog.consumers.aggregator.store._maps import LatestMap, SampleMap, StoreMap
from resultlog.consumers.aggregator.store._meta import (
    FORMAT,
    GENERATION_KEY,
    FlushPhase,
    LogIdentity,
    StoreMeta,
)
from resultlog.consumers.aggregator.store._records import (
    Changelog,
    ChangelogError,
    Entries,
    Sending,
)
from resultlog.consumers.fold import Contribution, FoldState, RunFold
from resultlog.schemas import RunKey

__all__ = ["DEFAULT_MEMORY", "PartitionStore", "db_options"]

log = logging.getLogger(__name__)
_M = TypeVar("_M", LatestMap, SampleMap)
_FLUSH_KEYS = 4096  # changed keys that make a flush due
# While the flush before is unacknowledged the next one waits (the thread folds on) up to
# this many times its keys; then the thread waits for the acknowledgement.
_IN_FLIGHT_SLACK = 4
_RETRY_S = 1.0  # after a changelog write failed, before a flush is due again
# How often unlogged writes are put on disk: a kill loses at most this much of what the
# changelog must then restore, and the meta on disk stays younger than a tombstone's life.
_PERSIST_S = 60.0
# The writes of a store a changelog backs: the changelog is their log (Kafka Streams' choice).
_UNLOGGED = WriteOptions()
_UNLOGGED.disable_wal = True  # type: ignore[method-assign,assignment]  # a property: the stub errs


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


class _Disk:
    """The store's RocksDB database and how its writes reach the disk: a changelog's flushes
    skip the write-ahead log (`unlogged`), put on disk every _PERSIST_S and before any logged
    write (a kill keeps a logged write and loses the unlogged ones before it)."""

    def __init__(self, db: Rdict) -> None:
        self.db = db
        self.unlogged = False  # writes not in the write-ahead log may be in the memtables
        self.persisted_at = time.monotonic()  # unlogged writes last sent to disk

    def write(self, entries: Entries, meta: StoreMeta | None, logged: bool) -> None:
        """Write entries (None: delete) and the meta entry in one batch (`logged`: to the
        write-ahead log too, so that a kill keeps it)."""
        batch = WriteBatch(raw_mode=True)
        put, delete = batch.put, batch.delete
        for key, value in entries:
            if value is None:
                delete(key)
            else:
                put(key, value)
        if meta is not None:
            batch.put(META, meta.encode())
        if not logged:
            self.db.write(batch, _UNLOGGED)
            self.unlogged = True
            now = time.monotonic()
            if now - self.persisted_at >= _PERSIST_S:
                self.db.flush(wait=False)  # in the background: memtables to table files
                self.persisted_at = now
            return
        if self.unlogged:
            # A kill would keep a logged write and lose the unlogged ones before it (memtables
            # are lost, the log replayed): they reach the disk first.
            self.db.flush(wait=True)
            self.unlogged = False
        self.db.write(batch)

    def close(self, *, persist: bool) -> None:
        """Release the database (`persist`: unlogged writes to disk first)."""
        if self.unlogged and persist:
            self.db.flush(wait=True)  # what the write-ahead log would otherwise replay
        self.db.close()


class _Outbox:
    """A store's flushes to its changelog, one in flight at a time, in explicit phases
    (`FlushPhase`): the flush in flight, a failed one's entries to send again, when the next
    one is due."""

    def __init__(self, flush_at: int) -> None:
        self.phase = FlushPhase.IDLE
        # IN_FLIGHT: the flush the changelog has not acknowledged yet (sending, entries, meta).
        self.flight: tuple[Sending, Entries, StoreMeta] | None = None
        self.unsent: Entries = []  # FAILED: its entries, sent again with the next flush
        self.retry_at = 0.0  # FAILED: no flush due before this
        self.due_at = flush_at  # pending keys at which `flush_due` asks again

    def sent(self, sending: Sending, entries: Entries, meta: StoreMeta) -> None:
        """A flush is on its way."""
        self.phase, self.flight = FlushPhase.IN_FLIGHT, (sending, entries, meta)

    def in_flight(self) -> bool:
        """Whether a flush waits for its acknowledgement (serving delivery reports)."""
        return self.flight is not None and not self.flight[0].done()

    def landing(self, wait: bool) -> tuple[Sending, Entries, StoreMeta] | None:
        """The flush in flight if it can be written now (`wait`: whether heard of or not)."""
        if self.flight is None or (not wait and not self.flight[0].done()):
            return None
        flight, self.flight, self.phase = self.flight, None, FlushPhase.IDLE
        return flight

    def failed(self, entries: Entries) -> None:
        """A flush failed: its entries go again with the next, after a pause."""
        self.phase = FlushPhase.FAILED
        self.retry_at = time.monotonic() + _RETRY_S
        self.unsent.extend(entries)

    def merged(self, entries: Entries) -> Entries:
        """What a failed flush left, then `entries` (newer values replace those)."""
        if not self.unsent:
            return entries
        merged = list(dict([*self.unsent, *entries]).items())
        self.unsent = []
        return merged


class PartitionStore:
    """The disk-backed per-key state of one results partition's runs, saved as `identity`'s
    (None: never saved as restorable) through `changelog` (None: on this machine only)."""

    def __init__(
        self,
        db: Rdict,
        path: Path,
        partition: int,
        cache_keys: int,
        *,
        identity: LogIdentity | None = None,
        changelog: Changelog | None = None,
    ) -> None:
        self.path = path
        self.partition = partition
        self.identity = identity  # what every flush's meta names
        self.changelog = changelog  # where each flush's changes go first
        self._disk = _Disk(db)
        self._limit = max(cache_keys, 1)
        # A flush costs a few microseconds per key, on the consumer thread: many small ones
        # keep each stall short (50,000 keys at once held the thread for 150 ms).
        self._flush_at = min(self._limit, _FLUSH_KEYS)
        self._outbox = _Outbox(self._flush_at)
        self._grown = 0  # keys flushed since memory was last measured
        self._changed: list[StoreMap[Any, Any]] = []  # the maps with unflushed keys
        self.pending = 0  # keys changed since the last flush
        self._maps: dict[bytes, StoreMap[Any, Any]] = {}  # by prefix: whose memory to evict
        self._unsaved: dict[RunKey, RunFold] = {}
        self._flushes = 0
        self.scratch = False  # a private copy (the shared one was locked): removed on close
        OPEN_PATHS.add(path)
        self.flushed_at = time.monotonic()
        self.covers: int | None = None  # the offset the meta on disk names
        self.changelog_offset = 0  # the changelog offset after the last flush held here
        self._repair: set[bytes] = set()  # keys the changelog may hold wrongly: rewritten
        self._runs: set[RunKey] = set()  # runs whose totals the store holds (or a flush sends)
        # The changelog generation it writes ("": none yet, its next flush writes it whole)
        # and the ID of the changelog topic that generation is in.
        self.generation = ""
        self._generation_of = ""

    def resume(self, meta: StoreMeta) -> None:
        """Go on from what a meta on disk says the store holds."""
        self.covers, self.changelog_offset = meta.next_offset, meta.changelog_offset
        self.generation, self._generation_of = meta.generation, meta.changelog_id

    @property
    def whole_due(self) -> bool:
        """Whether its next flush writes its state whole, beginning a changelog generation:
        it has none yet, or the changelog is another topic now (deleted and re-created)."""
        changelog = self.changelog
        if changelog is None or self.identity is None:
            return False
        return not self.generation or self._generation_of != changelog.topic_id

    @property
    def phase(self) -> FlushPhase:
        """Where its flush to the changelog stands."""
        return self._outbox.phase

    # -- what the maps call -----------------------------------------------------------------

    def read(self, key: bytes) -> bytes | None:
        """The bytes on disk under `key`."""
        raw: bytes | None = self._disk.db.get(key)
        return raw

    def changed(self, mapping: StoreMap[Any, Any]) -> None:
        """`mapping` has a first unflushed key: write its keys at the next flush."""
        self._changed.append(mapping)

    def items(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, bytes) on disk under `prefix`."""
        return _prefixed(self._disk.db.iter(), prefix)

    # -- what the aggregator state calls ----------------------------------------------------

    def new_fold(self, run_key: RunKey) -> RunFold:
        """An empty fold of a run whose per-key state lives here."""
        latest = self._map(LatestMap, run_prefix(LATEST, run_key), 0)
        samples = self._map(SampleMap, run_prefix(SAMPLES, run_key), 0)
        for mapping in (latest, samples):
            mapping.fresh = next(iter(self.items(mapping.prefix)), None) is None
        return RunFold(run_key, latest, samples.emptied())

    def touched(self, fold: RunFold) -> None:
        """The fold changed: save its totals at the next flush."""
        self._unsaved[fold.run_key] = fold

    @property
    def held(self) -> int:
        """Entries memory holds (unflushed ones included)."""
        return sum(len(mapping.known) for mapping in self._maps.values())

    def flush_due(self) -> bool:
        """Whether the pending changes call for a flush at this record boundary: they reached
        the flush size (while the flush before is in flight, only once far more are pending;
        until then it asks again a little later)."""
        outbox = self._outbox
        if self.pending < outbox.due_at:
            return False
        if outbox.phase is FlushPhase.FAILED and time.monotonic() < outbox.retry_at:
            return False
        if outbox.in_flight() and self.pending < self._flush_at * _IN_FLIGHT_SLACK:
            outbox.due_at = self.pending + max(self._flush_at // 8, 1)  # ask again later
            return False
        return True

    def repair(self, keys: Iterable[bytes]) -> None:
        """Write these keys' values (a tombstone if absent) to the changelog at the next
        flush: an interrupted flush left other values there."""
        self._repair.update(keys)

    def republish(self) -> None:
        """Write every entry to the changelog at the next flush, a generation of its own: the
        changelog does not back this store."""
        self.generation = ""

    def flush(self, next_offset: int, *, wait: bool = True) -> None:
        """Send the pending entries and changed totals, with the results offset they cover,
        to the changelog; each is written to disk in one batch naming the changelog offset
        once the changelog acknowledged it (`wait`: now, else at the next flush or `land`).
        A failed changelog write keeps its entries pending."""
        self.land(wait=True)  # one flush in flight: the changelog's records stay in order
        self._flushes += 1
        whole = self.whole_due
        if whole:
            self._repair.update(key for key, _ in self.items(b"") if key[:1] != b"\x00")
        entries = self._entries()
        if whole:  # the marker first: a restore that reaches it holds the whole state
            assert self.changelog is not None  # whole_due says so
            self.generation = uuid.uuid4().hex
            self._generation_of = self.changelog.topic_id
            entries.insert(0, (GENERATION_KEY, self.generation.encode()))
        if self.identity is None:
            self._disk.write(entries, None, True)
            self._sent()
            self._landed()
            return
        changelog = self.changelog
        try:  # a changelog written for the first time since it was re-created fences first
            writer = "" if changelog is None else changelog.writer(self.partition).hex()
        except ChangelogError as exc:
            self._sent()
            self._failed(entries, exc)
            return
        meta = StoreMeta(
            FORMAT,
            self.identity,
            self.partition,
            next_offset,
            int(time.time() * 1000),
            self.changelog_offset,
            "" if changelog is None else changelog.topic_id,
            runs=len(self._runs),
            generation=self.generation,
            writer=writer,
        )
        if changelog is None or not (entries or self.covers != next_offset):
            self._disk.write(entries, meta, changelog is None)
            self.covers = next_offset
            self._sent()
            self._landed()
            return
        try:
            sending = changelog.send(self.partition, entries, meta.encode())
        except ChangelogError as exc:
            self._sent()
            self._failed(entries, exc)
            return
        self._outbox.sent(sending, entries, meta)
        self._sent()
        if wait:
            self.land(wait=True)

    def land(self, *, wait: bool = False) -> None:
        """Write the flush in flight to disk once the changelog acknowledged it (`wait`:
        waiting for that); a failed one's entries go again with the next flush."""
        flight = self._outbox.landing(wait)
        if flight is None:
            return
        sending, entries, meta = flight
        try:
            offset = sending.wait()
        except ChangelogError as exc:
            self._failed(entries, exc)
            return
        meta = dataclasses.replace(meta, changelog_offset=offset)
        self._disk.write(entries, meta, False)  # the changelog holds it
        self.covers, self.changelog_offset = meta.next_offset, offset
        self._landed()

    def _failed(self, entries: Entries, exc: ChangelogError) -> None:
        """Keep a flush's entries to send again (memory still holds their values)."""
        log.warning("not flushing %s yet: %s", self.path, exc)
        self._outbox.failed(entries)
        self.pending = max(self.pending, len(self._outbox.unsent))

    def _entries(self) -> Entries:
        """Every pending change as (store key, bytes or None: deleted), a key once: what a
        failed flush left first, then what changed since (newer values replace those)."""
        entries: Entries = []
        for mapping in self._changed:
            known = mapping.known
            for key in mapping.unflushed:
                value = known[key]
                encoded = None if value is None else mapping.encode(value)
                entries.append((mapping.store_key(key), encoded))
        runs = self._runs
        for run_key, fold in self._unsaved.items():
            if len(fold):
                runs.add(run_key)
                entries.append((totals_key(run_key), encode_totals(fold.state(), len(fold))))
            else:
                runs.discard(run_key)
                entries.append((totals_key(run_key), None))
        entries = self._outbox.merged(entries)
        if self._repair:
            repair = self._repair - {key for key, _ in entries}
            if GENERATION_KEY in repair:
                # Never a tombstone (compaction would then take the generation's marker): the
                # generation this store is of, or none when this flush begins a new one.
                repair.discard(GENERATION_KEY)
                if not self.whole_due:
                    entries.append((GENERATION_KEY, self.generation.encode()))
            db = self._disk.db
            entries.extend((k, db.get(k)) for k in repair)
        return entries

    def _sent(self) -> None:
        """Forget what was pending: it is in flight (memory holds its values until landed)."""
        for mapping in self._changed:
            mapping.unflushed.clear()
            mapping.used = self._flushes
        self._changed.clear()
        self._repair.clear()
        self._grown += self.pending
        self.pending = 0
        self._unsaved.clear()
        self._outbox.due_at = self._flush_at
        self.flushed_at = time.monotonic()

    def _landed(self) -> None:
        """A flush is on disk: evict if memory holds too much."""
        if self._grown * 4 >= self._limit:  # measuring walks every map: not at every flush
            self._grown = 0
            self._evict()

    def write_restored(self, entries: Entries, meta: StoreMeta) -> None:
        """Write entries read from the changelog and the meta they bring, in one batch: not
        logged while the meta says `restoring` (a kill loses what was not flushed, and the
        restore restarts from its start), logged once the earlier ones are on disk if not."""
        self._disk.write(entries, meta, not meta.restoring)
        if not meta.restoring:
            self.resume(meta)

    def meta(self) -> StoreMeta | None:
        """The meta entry on disk (StoreFormatError if it does not decode)."""
        raw = self._disk.db.get(META)
        return None if raw is None else StoreMeta.decode(raw)

    def empty(self) -> bool:
        """Whether the store holds nothing at all."""
        return next(iter(self.items(b"")), None) is None

    def folds(self) -> dict[RunKey, RunFold]:
        """Every run's fold, resumed from its saved totals (StoreFormatError if one is bad)."""
        folds: dict[RunKey, RunFold] = {}
        for key, raw in self.items(TOTALS):
            run_key = run_of_totals(key)
            state, latest_count = decode_totals(raw)
            folds[run_key] = self._resumed(run_key, state, latest_count)
        self._runs = set(folds)
        return folds

    def fold_until_full(
        self, fold: RunFold, items: Sequence[tuple[int, Contribution]], start: int
    ) -> int:
        """Apply the contributions of items[start:] (offset, contribution) to `fold`, one of
        this store's, until the pending changes fill the cache; the index after the last."""
        index, count, limit = start, len(items), self._outbox.due_at
        while index < count:
            fold.apply(items[index][1])
            index += 1
            if self.pending >= limit:
                break
        return index

    def close(self) -> None:
        """Release the database (a scratch copy is removed)."""
        self._disk.close(persist=not self.scratch)
        OPEN_PATHS.discard(self.path)
        if self.scratch:
            Rdict.destroy(str(self.path), db_options())
        for mapping in self._maps.values():
            mapping.forget()
        self._maps.clear()
        self._changed.clear()
        self.pending = 0

    def _map(self, kind: type[_M], prefix: bytes, count: int | None) -> _M:
        """The run's mapping of one kind, made new (a run's maps are made once per store)."""
        mapping = kind(self, prefix, count)
        self._maps[prefix] = mapping
        return mapping

    def _resumed(self, run_key: RunKey, state: FoldState, latest_count: int) -> RunFold:
        """A run's fold resumed from saved totals over its entries on disk."""
        latest = self._map(LatestMap, run_prefix(LATEST, run_key), latest_count)
        samples = self._map(SampleMap, run_prefix(SAMPLES, run_key), None)
        return RunFold.resume(run_key, state, latest, samples.emptied(), samples)

    def _evict(self) -> None:
        """Drop the memory of the least recently changed maps (everything is flushed) until
        what is held fits the cache's size."""
        held = self.held
        if held <= self._limit:
            return
        for mapping in sorted(self._maps.values(), key=_used):
            if mapping.unflushed:  # changed since the flush that landed: not on disk yet
                continue
            held -= mapping.forget()
            if held <= self._limit:
                return


def _used(mapping: StoreMap[Any, Any]) -> int:
    return mapping.used


def _prefixed(it: RdictIter, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    it.seek(prefix)
    while it.valid():
        key = it.key()
        if not key.startswith(prefix):
            return
        yield key, it.value()
        it.next()
