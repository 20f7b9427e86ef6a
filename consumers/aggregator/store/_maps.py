"""One run's per-key and per-sample fold state as mappings over its partition's store.

A RunFold given these mappings keeps its totals in memory and everything per key on disk;
the arithmetic is the fold's own, so its summaries are those of an in-memory fold. Each
mapping holds the entries it knows in a dict of its own, keyed as the fold keys them (no
bytes key is built on the hot path); the store writes what changed at each flush and evicts
whole mappings' entries when memory holds more than its limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from resultlog.consumers.aggregator.store._codec import (
    decode_contribution,
    decode_sample,
    encode_contribution,
    encode_sample,
    latest_key,
    latest_of_key,
)
from resultlog.consumers.fold import Contribution, Sample

if TYPE_CHECKING:
    from resultlog.consumers.aggregator.store._store import PartitionStore

__all__ = ["LatestMap", "SampleMap", "StoreMap"]

_K = TypeVar("_K")
_V = TypeVar("_V")
_MISSING: Any = object()


class StoreMap(MutableMapping[_K, _V], Generic[_K, _V]):
    """Entries under one prefix of a partition store; `count` is kept, never scanned (None:
    unknown, for a resumed map that never needed it)."""

    __slots__ = ("_store", "count", "fresh", "known", "prefix", "unflushed", "used")

    def __init__(self, store: PartitionStore, prefix: bytes, count: int | None = 0) -> None:
        self._store = store
        self.prefix = prefix
        self.count = count
        # What this map knows: values, and None for keys known to hold nothing (a read miss,
        # a delete). Fresh: nothing on disk is missing from it, so a miss here is a miss.
        self.known: dict[_K, _V | None] = {}
        self.fresh = False  # a new run's store sets it when the disk holds none of its keys
        self.unflushed: set[_K] = set()  # the keys changed since the last flush
        self.used = 0  # the store's flush count when this map last changed: eviction order

    def store_key(self, key: _K) -> bytes:
        """The store's key of an entry of this mapping."""
        raise NotImplementedError

    def key_of(self, raw: bytes) -> _K:
        """The mapping's key of a store key under its prefix."""
        raise NotImplementedError

    def encode(self, value: _V) -> bytes:
        """The bytes of a value."""
        raise NotImplementedError

    def decode(self, raw: bytes) -> _V:
        """The value of its bytes."""
        raise NotImplementedError

    def get(self, key: _K, default: _V | None = None) -> _V | None:  # type: ignore[override]
        value = self.known.get(key, _MISSING)
        if value is _MISSING:
            value = self._read(key)
        return default if value is None else value

    def __getitem__(self, key: _K) -> _V:
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def __setitem__(self, key: _K, value: _V) -> None:
        if self._put(key, value) is None and self.count is not None:
            self.count += 1

    def pop(self, key: _K, default: _V | None = None) -> _V | None:  # type: ignore[override]
        value = self.get(key)
        if value is None:
            return default
        if self.count is not None:
            self.count -= 1
        self._put(key, None)
        return value

    def __delitem__(self, key: _K) -> None:
        if self.pop(key) is None:
            raise KeyError(key)

    def values(self) -> list[_V]:  # type: ignore[override]
        return [value for _, value in self.entries()]

    def entries(self) -> list[tuple[_K, _V]]:
        """Every (key, value) held, unflushed changes included."""
        found: dict[_K, Any] = {}
        if not self.fresh:
            for raw_key, raw in self._store.items(self.prefix):
                found[self.key_of(raw_key)] = raw
        found.update(self.known)
        out = []
        for key, held in found.items():
            value = self.decode(held) if isinstance(held, bytes) else held
            if value is not None:
                out.append((key, value))
        return out

    def __iter__(self) -> Iterator[_K]:
        raise TypeError("a store mapping is read by key or by values()")

    def __len__(self) -> int:
        if self.count is None:
            raise TypeError("this mapping does not know its size")
        return self.count

    def clear(self) -> None:
        """Remove every entry under the prefix."""
        if self.count == 0:
            return  # nothing to scan for: a new run's first records cost no scan
        for key, _ in self.entries():
            self._put(key, None)
        self.count = 0

    def forget(self) -> int:
        """Drop what memory holds (all of it flushed): later reads go to the disk; how many
        entries were dropped."""
        dropped = len(self.known)
        self.known = {}
        self.unflushed = set()
        self.fresh = False
        return dropped

    def _read(self, key: _K) -> _V | None:
        """The value on disk (None: absent), remembered; a fresh map reads nothing."""
        if self.fresh:
            return None
        raw = self._store.read(self.store_key(key))
        value = None if raw is None else self.decode(raw)
        self.known[key] = value
        return value

    def _put(self, key: _K, value: _V | None) -> _V | None:
        """Set (None: delete) `key` until the next flush; what it held before."""
        known = self.known
        held = known.get(key, _MISSING)
        if held is _MISSING:  # not read before: the fold's get-then-set always reads first
            held = self._read(key)
        known[key] = value
        unflushed = self.unflushed
        if key not in unflushed:
            if not unflushed:
                self._store.changed(self)
            unflushed.add(key)
            self._store.pending += 1
        return held


class LatestMap(StoreMap[tuple[int, ...], Contribution]):
    """A run's latest contribution per (sample_index, epoch)."""

    __slots__ = ()

    def store_key(self, key: tuple[int, ...]) -> bytes:
        return latest_key(self.prefix, key)

    def key_of(self, raw: bytes) -> tuple[int, ...]:
        return latest_of_key(raw, len(self.prefix))

    def encode(self, value: Contribution) -> bytes:
        return encode_contribution(value)

    def decode(self, raw: bytes) -> Contribution:
        return decode_contribution(raw)


class SampleMap(StoreMap[str, Sample]):
    """A run's per-sample epochs inside its shape."""

    __slots__ = ()

    def store_key(self, key: str) -> bytes:
        return self.prefix + key.encode("utf-8", "surrogatepass")

    def key_of(self, raw: bytes) -> str:
        return raw[len(self.prefix) :].decode("utf-8", "surrogatepass")

    def encode(self, value: Sample) -> bytes:
        return encode_sample(value)

    def decode(self, raw: bytes) -> Sample:
        return decode_sample(raw)

    def emptied(self) -> Callable[[], SampleMap]:
        """The fold's factory of an empty per-sample mapping: this one, cleared."""

        def empty() -> SampleMap:
            self.clear()
            return self

        return empty
