"""Whether a reader may trust the run index: every check of its records, in one place.

An index record is used only if it names the exact results log read now (cluster ID, topic
name and ID: a deleted and re-created topic has a new ID), the partition read, and offsets
below the partition's high watermark. What the reader then meets is checked too: intervals
are built so that no record of the run lies within `GAP` offsets after an interval's end
(closer ones would have joined it), so the reader also reads `PROBE` offsets after each end;
a record of the run met below "indexed through" and outside the intervals proves the entry
wrong, and the reader reads the partition in full instead.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from confluent_kafka import Message

from resultlog.consumers._index_codec import (
    GAP,
    IndexedLog,
    IndexRecord,
    IndexRecordError,
    decode,
)
from resultlog.consumers.errors import ConsumerError
from resultlog.kafka import KafkaClientError, KafkaConnection

__all__ = [
    "PROBE",
    "Entry",
    "UnusableIndexError",
    "checked_entry",
    "checked_marker",
    "guarded",
    "results_log",
]

log = logging.getLogger(__name__)
PROBE = 64  # offsets read after each interval's end: a run's record there refutes the entry
assert PROBE < GAP


class UnusableIndexError(ConsumerError):
    """Why the run index cannot speak for a partition (the reader then reads all of it)."""


@dataclass(frozen=True)
class Entry:
    """A run's trusted intervals, and the offset below which they hold all its records."""

    intervals: list[tuple[int, int]]
    through: int

    def ranges(self, low: int, high: int) -> list[tuple[int, int]]:
        """What to read in [low, high): the intervals, a probe after each, and the tail."""
        through = self.through
        wanted = [(s, max(e, min(e + PROBE, through))) for s, e in self.intervals]
        wanted = [(max(s, low), min(e, high)) for s, e in wanted]
        wanted.append((max(through, low), high))
        return [(s, e) for s, e in wanted if e > s]

    def refutes(self, offset: int) -> bool:
        """Whether a record of the run at `offset` proves the entry wrong."""
        if offset >= self.through:
            return False
        i = bisect.bisect_right(self.intervals, (offset, float("inf"))) - 1
        return i < 0 or offset >= self.intervals[i][1]


def results_log(kafka: KafkaConnection, timeout_s: float) -> IndexedLog:
    """The exact results log read now (UnusableIndexError: it cannot be told)."""
    topic = kafka.results_topic
    try:
        cluster_id, topic_id = kafka.topic_identity(topic, timeout_s)
    except KafkaClientError as exc:
        raise UnusableIndexError(f"cannot tell which log {topic} is: {exc}") from exc
    return IndexedLog(topic, cluster_id, topic_id)


def checked_marker(value: bytes, expected: IndexedLog, partition: int, high: int) -> int:
    """A partition's "indexed through" (UnusableIndexError: it is not to be used)."""
    record = _ours(value, expected, partition, "indexed-through record")
    if record.through is None:
        raise UnusableIndexError("an indexed-through record of the wrong kind")
    if record.through > high:
        reason = f"the index says indexed through {record.through}, past the end ({high})"
        raise UnusableIndexError(reason)
    return record.through


def checked_entry(
    value: bytes, expected: IndexedLog, partition: int, high: int, through: int
) -> Entry:
    """A run's entry with the partition's "indexed through" (UnusableIndexError: it is not
    to be used)."""
    record = _ours(value, expected, partition, "run index entry")
    if record.intervals is None:
        raise UnusableIndexError("a run index entry of the wrong kind")
    pairs = record.intervals.pairs()
    if pairs and pairs[-1][1] > high:
        reason = f"a run index entry covering offset {pairs[-1][1] - 1}, past the end ({high})"
        raise UnusableIndexError(reason)
    return Entry(pairs, through)


def guarded(
    messages: Iterator[Message],
    prefix: bytes,
    entry: Entry,
    read: list[tuple[int, int]],
    instead: Callable[[str], Iterator[Message]],
) -> Iterator[Message]:
    """`messages` (of the ranges `read`), until one of the run's refutes the entry: then the
    rest of `instead(why)` (the whole partition), the offsets already given skipped."""
    for message in messages:
        offset = message.offset() or 0
        key = message.key()
        if key is not None and key.startswith(prefix) and entry.refutes(offset):
            why = f"a record of the run at offset {offset}, outside its run index entry"
            log.warning("the run index is wrong (%s): reading the whole partition", why)
            yield from _not_given(instead(why), read, offset)
            return
        yield message


def _not_given(
    messages: Iterator[Message], read: list[tuple[int, int]], upto: int
) -> Iterator[Message]:
    """The messages a guided read has not given yet: those at `upto` or past it, or outside
    the ranges read."""
    starts = [s for s, _ in read]
    for message in messages:
        offset = message.offset() or 0
        i = bisect.bisect_right(starts, offset) - 1
        if offset >= upto or i < 0 or offset >= read[i][1]:
            yield message


def _ours(value: bytes, expected: IndexedLog, partition: int, what: str) -> IndexRecord:
    """An index record about this results partition of this exact log (UnusableIndexError:
    it is not)."""
    try:
        record = decode(value)
    except IndexRecordError as exc:
        raise UnusableIndexError(f"unusable {what}: {exc}") from exc
    if record.partition != partition or record.log.topic != expected.topic:
        raise UnusableIndexError(f"a {what} of {record.log.topic}[{record.partition}]")
    if record.log.cluster_id != expected.cluster_id:
        raise UnusableIndexError(f"a {what} of cluster {record.log.cluster_id!r}")
    if record.log.topic_id != expected.topic_id:
        reason = f"a {what} of topic ID {record.log.topic_id!r}, a topic deleted since"
        raise UnusableIndexError(reason)
    return record
