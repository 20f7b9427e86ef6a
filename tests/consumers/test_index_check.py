"""What a reader trusts of the run index: pure checks, no broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resultlog.consumers._index_check import (
    PROBE,
    Entry,
    UnusableIndexError,
    checked_entry,
    checked_marker,
    guarded,
)
from resultlog.consumers._index_codec import (
    GAP,
    IndexedLog,
    Intervals,
    encode_intervals,
    encode_marker,
)

LOG = IndexedLog("results", "cluster-1", "topic-1")


class _Message:
    """What `guarded` asks of a message: its offset and key."""

    def __init__(self, offset: int, key: bytes) -> None:
        self._offset, self._key = offset, key

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return self._key


def test_a_marker_or_entry_of_another_log_is_refused() -> None:
    for other in (
        IndexedLog("results", "cluster-1", "topic-2"),  # deleted and re-created
        IndexedLog("results", "cluster-2", "topic-1"),
        IndexedLog("other", "cluster-1", "topic-1"),
        IndexedLog("results", "", ""),
    ):
        with pytest.raises(UnusableIndexError):
            checked_marker(encode_marker(other, 0, 10), LOG, 0, 100)
        with pytest.raises(UnusableIndexError):
            checked_entry(encode_intervals(other, 0, Intervals([1], [5])), LOG, 0, 100, 10)
    with pytest.raises(UnusableIndexError, match="topic ID"):
        checked_marker(
            encode_marker(IndexedLog("results", "cluster-1", "topic-2"), 0, 10), LOG, 0, 100
        )
    assert checked_marker(encode_marker(LOG, 0, 10), LOG, 0, 100) == 10
    with pytest.raises(UnusableIndexError):
        checked_marker(encode_marker(LOG, 1, 10), LOG, 0, 100)


def test_offsets_past_the_high_watermark_are_refused() -> None:
    with pytest.raises(UnusableIndexError, match="past the end"):
        checked_marker(encode_marker(LOG, 0, 101), LOG, 0, 100)
    with pytest.raises(UnusableIndexError, match="past the end"):
        checked_entry(encode_intervals(LOG, 0, Intervals([1, 90], [5, 120])), LOG, 0, 100, 80)


def test_the_reader_reads_a_probe_after_each_interval_and_the_tail() -> None:
    entry = Entry([(10, 20), (5000, 5003)], through=9000)
    assert entry.ranges(0, 9500) == [
        (10, 20 + PROBE), (5000, 5003 + PROBE), (9000, 9500)
    ]  # fmt: skip
    assert Entry([(10, 20)], through=30).ranges(15, 100) == [(15, 30), (30, 100)]


@given(st.lists(st.integers(min_value=0, max_value=50_000), min_size=1, max_size=300))
def test_a_true_entry_is_never_refuted_by_its_own_records(added: list[int]) -> None:
    intervals = Intervals()
    for offset in added:
        intervals.add(offset)
    entry = Entry(intervals.pairs(), through=max(added) + 1)
    assert not any(entry.refutes(offset) for offset in added)
    # and none of the run's records lies in the probe after an interval: closer would join it
    assert all(not (e <= offset < e + PROBE) for _, e in intervals.pairs() for offset in added)
    assert PROBE < GAP


def test_a_record_met_outside_the_entry_switches_to_the_whole_partition() -> None:
    entry = Entry([(150, 160)], through=400)
    read = entry.ranges(0, 400)
    prefix = b"r/b/m/"
    given_messages = [_Message(o, prefix + b"%d/0" % o) for o in range(150, 160 + PROBE)]
    whole = [_Message(o, prefix + b"%d/0" % o) for o in range(400)]
    why: list[str] = []

    def instead(reason: str) -> Iterator[_Message]:
        why.append(reason)
        return iter(whole)

    out = [m.offset() or 0 for m in guarded(iter(given_messages), prefix, entry, read, instead)]  # type: ignore[arg-type]
    assert sorted(out) == list(range(400)) and len(out) == len(set(out))
    assert why and "offset 160" in why[0]


def test_records_of_other_runs_refute_nothing() -> None:
    entry = Entry([(150, 160)], through=400)
    others = [_Message(o, b"x/b/m/%d/0" % o) for o in range(150, 224)]
    out = list(guarded(iter(others), b"r/b/m/", entry, entry.ranges(0, 400), lambda _: iter(())))  # type: ignore[arg-type]
    assert len(out) == len(others)
