"""One run's per-key and per-sample fold state as mappings over its partition's store.

A RunFold given these mappings keeps its totals in memory and everything per key on disk;
the arithmetic is the fold's own, so its summaries are those of an in-memory fold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Generic, TypeVar

from resultlog.consumers.aggregator.store._codec import (
    decode_contribution,
    decode_sample,
    latest_key,
)
from resultlog.consumers.fold import Contribution, Sample

if TYPE_CHECKING:
    from resultlog.consumers.aggregator.store._store import PartitionStore

__all__ = ["LatestMap", "SampleMap"]

_K = TypeVar("_K")
_V = TypeVar("_V")


class _StoreMap(MutableMapping[_K, _V], Generic[_K, _V]):
    """Entries under one prefix of a partition store; `count` is kept, never scanned (None:
    unknown, for a resumed map that never needed it)."""

    __slots__ = ("_store", "count", "prefix")

    def __init__(self, store: PartitionStore, prefix: bytes, count: int | None = 0) -> None:
        self._store = store
        self.prefix = prefix
        self.count = count

    def store_key(self, key: _K) -> bytes:
        """The store's key of an entry of this mapping."""
        raise NotImplementedError

    def _decode(self, raw: bytes) -> _V:
        raise NotImplementedError

    def get(self, key: _K, default: _V | None = None) -> _V | None:  # type: ignore[override]
        value = self._store.load(self.store_key(key), self._decode, self.prefix)
        return default if value is None else value

    def __getitem__(self, key: _K) -> _V:
        value = self._store.load(self.store_key(key), self._decode, self.prefix)
        if value is None:
            raise KeyError(key)
        return value

    def __setitem__(self, key: _K, value: _V) -> None:
        if not self._store.save(self.store_key(key), value, self.prefix) and self.count is not None:
            self.count += 1

    def pop(self, key: _K, default: _V | None = None) -> _V | None:  # type: ignore[override]
        raw = self.store_key(key)
        value = self._store.load(raw, self._decode, self.prefix)
        if value is None:
            return default
        if self.count is not None:
            self.count -= 1
        self._store.save(raw, None, self.prefix)
        return value

    def __delitem__(self, key: _K) -> None:
        if self.pop(key) is None:
            raise KeyError(key)

    def values(self) -> list[_V]:  # type: ignore[override]
        return [value for _, value in self._store.scan(self.prefix, self._decode)]

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
        for raw, _ in self._store.scan(self.prefix, self._decode):
            self._store.save(raw, None, self.prefix)
        self.count = 0


class LatestMap(_StoreMap[tuple[int, ...], Contribution]):
    """A run's latest contribution per (sample_index, epoch)."""

    __slots__ = ()

    def store_key(self, key: tuple[int, ...]) -> bytes:
        return latest_key(self.prefix, key)

    def _decode(self, raw: bytes) -> Contribution:
        return decode_contribution(raw)


class SampleMap(_StoreMap[str, Sample]):
    """A run's per-sample epochs inside its shape."""

    __slots__ = ()

    def store_key(self, key: str) -> bytes:
        return self.prefix + key.encode("utf-8", "surrogatepass")

    def _decode(self, raw: bytes) -> Sample:
        return decode_sample(raw)

    def emptied(self) -> Callable[[], SampleMap]:
        """The fold's factory of an empty per-sample mapping: this one, cleared."""

        def empty() -> SampleMap:
            self.clear()
            return self

        return empty
