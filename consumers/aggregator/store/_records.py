"""A store's changelog records: what each flush writes, and where a restore may stop.

Kafka Streams' and Quix Streams' design, for our store: every flush writes the entries it
changed (the store's own keys and bytes, so the store and its changelog share one codec)
and then a marker, the store's meta entry naming the results offset the flush reflects. A
store records, in the same batch as the data, the changelog offset after the marker it holds.

The changelog is compacted and written without transactions, so two things can happen: a
writer killed mid-flush leaves entries with no marker after them (a restore ignores them, and
the next flush rewrites those keys), and compaction may meanwhile have removed an older value
of such a key. A restore checks the runs those keys belong to: their entry counts must equal
what their totals say, else the changelog is refused and the partition rebuilt.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from resultlog.consumers.aggregator.store._codec import FENCE, META, untag
from resultlog.consumers.aggregator.store._meta import GENERATION_KEY
from resultlog.consumers.errors import ConsumerError

__all__ = [
    "Changelog",
    "ChangelogError",
    "ChangelogRecord",
    "Entries",
    "Sending",
    "Tail",
    "find_tail",
]

Entries = list[tuple[bytes, bytes | None]]


class ChangelogError(ConsumerError):
    """A changelog could not be written or read."""


class ChangelogRecord(NamedTuple):
    """One record of a changelog partition (value None: a tombstone)."""

    # A tuple: a restore makes one per record, at a third of a frozen dataclass's cost.
    offset: int
    key: bytes
    value: bytes | None


class Sending(Protocol):
    """A flush on its way to the changelog."""

    def done(self) -> bool:
        """Whether it was acknowledged or failed (`wait` returns at once)."""
        ...

    def wait(self) -> int:
        """The changelog offset after its marker, once acknowledged (ChangelogError if not)."""
        ...


class Changelog(Protocol):
    """Where a store's flushes go before they are written to disk."""

    topic_id: str  # which changelog topic: its offsets mean nothing in another

    def writer(self, partition: int) -> bytes:
        """The tag every write of this changelog to the partition carries, after its fence."""
        ...

    def send(self, partition: int, entries: Entries, marker: bytes) -> Sending:
        """Start writing the entries, then the marker (ChangelogError if it cannot start)."""
        ...


@dataclass(frozen=True)
class Tail:
    """Where a changelog partition's last marker is, and the keys written after it (with
    the generation marker's value among them: a retry writes it again, and compaction may
    then have removed its first copy, before the marker)."""

    marker: ChangelogRecord | None
    after: frozenset[bytes]
    generation_after: bytes | None = None
    writer_after: bytes | None = None  # the writer the last fence after the marker names


def find_tail(
    read: Callable[[int, int], Iterable[ChangelogRecord]], start: int, end: int, window: int
) -> Tail:
    """The last marker in [start, end) and the keys after it (values without their tags),
    reading back from the end in doubling windows (the records after the last marker are at
    most a few flushes). A tombstoned marker (a cleared changelog) leaves no marker: nothing
    before it counts. Fences are not state: no key after the marker is one."""
    low = max(start, end - window)
    while True:
        marker: ChangelogRecord | None = None
        seen = False
        after: set[bytes] = set()
        generation: bytes | None = None
        writer: bytes | None = None
        for record in read(low, end):
            if record.key == META:
                marker, seen, after = (record if record.value else None), True, set()
                if marker is not None:
                    marker = marker._replace(value=untag(marker.value))
                generation = writer = None
            elif record.key.startswith(FENCE):
                writer = record.key[len(FENCE) :]
            else:
                after.add(record.key)
                if record.key == GENERATION_KEY:
                    generation = untag(record.value)
        if seen or low <= start:
            return Tail(marker, frozenset(after), generation, writer)
        low = max(start, end - 2 * (end - low))
