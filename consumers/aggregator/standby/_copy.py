"""One warm copy: a store under this instance's state directory, at the path an active store
of its partition would use, brought up to date from the partition's changelog a chunk at a
time (each chunk ends at a flush marker, so a copy closed at any moment resumes from the
last one it applied)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from resultlog.consumers.aggregator.store import (
    KafkaChangelog,
    LogIdentity,
    PartitionStore,
    Refused,
    StoreFormatError,
    restore_changelog,
)
from resultlog.consumers.errors import ConsumerError

__all__ = ["CHUNK", "Released", "WarmCopy"]

CHUNK = 100_000  # changelog records applied per read: what a hand-over may have to read again


class Released(ConsumerError):  # noqa: N818 - a signal, not an error
    """The copy is handed over (or the keeper stops) while it reads its changelog."""


@dataclass(eq=False)
class WarmCopy:
    """A partition kept warm: its store, the changelog offset it holds and the end seen."""

    partition: int
    owner: str  # the name of the member that serves it
    lock: threading.Lock = field(default_factory=threading.Lock)  # held while the store is used
    store: PartitionStore | None = None
    offset: int = 0  # the changelog offset after the last flush the store holds
    end: int = 0  # the changelog's end when last looked at
    releasing: bool = False  # set (outside the lock) to stop a read at its next batch
    _tried: int = -1  # the end of a read that found no complete flush: not read before it moves
    _whole: bool = False  # a flush longer than a chunk: read to the end at once

    @property
    def more(self) -> bool:
        """Whether the next `tail` has complete flushes to read without waiting for more."""
        return self.offset < self.end and self.end != self._tried

    def held(self) -> str:
        """What the store holds, as its meta says: the changelog offset after its last
        flush, "mid-restore from" the offset a read cut short began at, or "none"."""
        assert self.store is not None  # under the lock, open
        try:
            meta = self.store.meta()
        except StoreFormatError as exc:
            return f"none ({exc})"
        if meta is None:
            return "none"
        prefix = "mid-restore from " if meta.restoring else ""
        return f"{prefix}{meta.changelog_offset}"

    def tail(self, changelog: KafkaChangelog, identity: LogIdentity) -> Refused | None:
        """Apply the complete flushes written since the last call (a chunk of them); why the
        changelog cannot be used, if it cannot (the caller then drops the copy)."""
        store, partition = self.store, self.partition
        assert store is not None  # a copy is tailed once open, under its lock
        low, high = changelog.bounds(partition)
        self.end = high
        if not low <= self.offset <= high:
            return Refused("changelog", f"it holds offset {self.offset}, outside [{low}, {high}]")
        if high in (self.offset, self._tried):
            return None
        end = high if self._whole else min(high, self.offset + CHUNK)
        refused = restore_changelog(
            store, lambda a, b: changelog.read(partition, a, b), (self.offset, end), identity,
            self._check, entries=lambda a, b: changelog.entries(partition, a, b),
            changelog_id=changelog.topic_id,
        )  # fmt: skip
        if refused is not None:
            return refused
        meta = store.meta()
        if meta is not None and not meta.restoring and meta.changelog_offset > self.offset:
            self.offset, self._whole, self._tried = meta.changelog_offset, False, -1
        elif end < high:
            self._whole = True
        else:  # what follows the last marker is a flush under way (or one cut short)
            self._tried = high
        return None

    def _check(self, _offset: int) -> None:
        if self.releasing:
            raise Released(f"partition {self.partition} released")
