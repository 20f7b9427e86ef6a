"""The run index records: a run key's offset intervals, and a partition's "indexed through".

Both live in the index partition numbered like the results partition they describe. Keys:
a run key's byte prefix (`run_id/benchmark_id/model/`, as results keys start) for its
intervals, `MARKER_KEY` for the partition's "indexed through". Values are Avro single-object
encoded (`C3 01`, fingerprint, body) under `run_index.v2.avsc`, naming the exact results log
(cluster ID, topic name and ID) the offsets are of: a v1 record names none and is never used.
"""

from __future__ import annotations

import bisect
import io
from dataclasses import dataclass, field
from typing import Any

import fastavro

from resultlog.consumers.errors import ConsumerError
from resultlog.schemas import shipped_catalog
from resultlog.schemas._catalog import RUN_INDEX

__all__ = [
    "FORMAT_VERSION",
    "MARKER_KEY",
    "IndexRecord",
    "IndexRecordError",
    "IndexedLog",
    "Intervals",
    "decode",
    "encode_intervals",
    "encode_marker",
    "run_prefix",
]

FORMAT_VERSION = 1
MARKER_KEY = b"\x00indexed-through"  # never a run prefix: those are printable ASCII
GAP = 4096  # offsets between two records of a run that still share an interval
MAX_INTERVALS = 256  # beyond, the two closest intervals merge (coarser, never wrong)
_SCHEMA = shipped_catalog().current(RUN_INDEX)
_PREFIX = b"\xc3\x01" + _SCHEMA.fingerprint
_INTERVALS = "resultlog.RunIntervals"
_MARKER = "resultlog.IndexedThrough"


class IndexRecordError(ConsumerError, ValueError):
    """An index record that cannot be decoded or does not hold together."""


def run_prefix(key: bytes | None) -> bytes | None:
    """The run key prefix of a results key (its first three parts and a `/`); None if it has
    fewer than four parts: a reader's prefix filter would never match it either."""
    if key is None:
        return None
    first = key.find(b"/")
    second = key.find(b"/", first + 1) if first >= 0 else -1
    third = key.find(b"/", second + 1) if second >= 0 else -1
    return key[: third + 1] if third >= 0 else None


@dataclass
class Intervals:
    """Sorted, disjoint half-open offset intervals; adding an offset merges across gaps of
    up to `GAP`, and more than `MAX_INTERVALS` merge the closest two (a superset stays true)."""

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)

    def add(self, offset: int) -> None:
        """Cover `offset` (the common case, the newest offset so far, in O(1))."""
        ends = self.ends
        if ends and offset >= self.starts[-1]:
            if offset < ends[-1] + GAP:
                ends[-1] = max(ends[-1], offset + 1)
                return
            self.starts.append(offset)
            ends.append(offset + 1)
        else:
            self._insert(offset, offset + 1)
        if len(ends) > MAX_INTERVALS:
            self._merge_closest()

    def cover(self, start: int, end: int) -> None:
        """Cover every offset of [start, end)."""
        if start < end:
            self._insert(start, end)
            while len(self.ends) > MAX_INTERVALS:
                self._merge_closest()

    def pairs(self) -> list[tuple[int, int]]:
        """The intervals as (start, end) pairs."""
        return list(zip(self.starts, self.ends, strict=True))

    def _insert(self, start: int, end: int) -> None:
        index = bisect.bisect_left(self.ends, start - GAP)  # first interval that may touch
        stop = index
        while stop < len(self.starts) and self.starts[stop] <= end + GAP:
            start, end = min(start, self.starts[stop]), max(end, self.ends[stop])
            stop += 1
        self.starts[index:stop] = [start]
        self.ends[index:stop] = [end]

    def _merge_closest(self) -> None:
        gaps = [self.starts[i + 1] - self.ends[i] for i in range(len(self.ends) - 1)]
        i = gaps.index(min(gaps))
        self.ends[i] = self.ends[i + 1]
        del self.starts[i + 1], self.ends[i + 1]


@dataclass(frozen=True)
class IndexedLog:
    """The exact results log index offsets are of: a re-created topic has a new topic ID."""

    topic: str
    cluster_id: str
    topic_id: str


@dataclass(frozen=True)
class IndexRecord:
    """One decoded index value: a run's intervals, or a partition's "indexed through"."""

    log: IndexedLog
    partition: int
    intervals: Intervals | None = None
    through: int | None = None


def encode_intervals(log: IndexedLog, partition: int, intervals: Intervals) -> bytes:
    """A run's index entry."""
    body = {"starts": intervals.starts, "ends": intervals.ends}
    return _encode(log, partition, (_INTERVALS, body))


def encode_marker(log: IndexedLog, partition: int, through: int) -> bytes:
    """A partition's "indexed through" record."""
    return _encode(log, partition, (_MARKER, {"offset": through}))


def decode(value: bytes) -> IndexRecord:
    """An index record; IndexRecordError if the bytes are not one of ours that holds together."""
    if not value.startswith(_PREFIX):
        raise IndexRecordError(
            "not a run index record of a known schema version (v1 records name no topic ID)"
        )
    try:
        datum: Any = fastavro.schemaless_reader(
            io.BytesIO(value[len(_PREFIX) :]), _SCHEMA.parsed, None, return_record_name=True
        )
    except Exception as exc:  # truncated or garbled bytes
        raise IndexRecordError(f"undecodable run index record: {exc!r}") from exc
    if datum["format_version"] != FORMAT_VERSION:
        raise IndexRecordError(f"unknown run index format_version {datum['format_version']}")
    log = IndexedLog(datum["results_topic"], datum["cluster_id"], datum["topic_id"])
    partition = datum["partition"]
    kind, body = datum["body"]
    if kind == _MARKER:
        if body["offset"] < 0:
            raise IndexRecordError(f"negative indexed-through offset {body['offset']}")
        return IndexRecord(log, partition, through=body["offset"])
    starts, ends = list(body["starts"]), list(body["ends"])
    ordered = all(s < e for s, e in zip(starts, ends, strict=False)) and all(
        e < s for e, s in zip(ends, starts[1:], strict=False)
    )
    if len(starts) != len(ends) or not ordered or (starts and starts[0] < 0):
        raise IndexRecordError("run index intervals are not sorted, disjoint and non-empty")
    return IndexRecord(log, partition, intervals=Intervals(starts, ends))


def _encode(log: IndexedLog, partition: int, body: tuple[str, dict[str, Any]]) -> bytes:
    datum = {
        "format_version": FORMAT_VERSION,
        "results_topic": log.topic,
        "partition": partition,
        "cluster_id": log.cluster_id,
        "topic_id": log.topic_id,
        "body": body,
    }
    out = io.BytesIO()
    out.write(_PREFIX)
    fastavro.schemaless_writer(out, _SCHEMA.parsed, datum)
    return out.getvalue()
