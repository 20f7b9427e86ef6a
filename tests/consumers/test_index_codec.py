"""The run index records and intervals: pure logic, no broker."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resultlog.consumers._index_codec import (
    GAP,
    MAX_INTERVALS,
    IndexedLog,
    IndexRecordError,
    Intervals,
    decode,
    encode_intervals,
    encode_marker,
    run_prefix,
)
from resultlog.consumers._run_read import READ_GAP, _merged

offsets = st.lists(st.integers(min_value=0, max_value=10**7), max_size=600)
LOG = IndexedLog("results", "cluster-1", "topic-id-1")


@given(offsets)
def test_intervals_cover_every_offset_added_in_any_order(added: list[int]) -> None:
    intervals = Intervals()
    for offset in added:
        intervals.add(offset)
    pairs = intervals.pairs()
    assert all(s < e for s, e in pairs)
    assert all(e1 < s2 for (_, e1), (s2, _) in itertools.pairwise(pairs))
    assert len(pairs) <= MAX_INTERVALS
    for offset in added:
        assert any(s <= offset < e for s, e in pairs), offset


def test_close_offsets_share_an_interval_and_far_ones_do_not() -> None:
    intervals = Intervals()
    for offset in (10, 11, 12 + GAP - 2, 10 * GAP):
        intervals.add(offset)
    assert intervals.pairs() == [(10, 11 + GAP), (10 * GAP, 10 * GAP + 1)]


@given(offsets)
def test_entries_round_trip(added: list[int]) -> None:
    intervals = Intervals()
    for offset in added:
        intervals.add(offset)
    record = decode(encode_intervals(LOG, 2, intervals))
    assert (record.log, record.partition, record.through) == (LOG, 2, None)
    assert record.intervals is not None and record.intervals.pairs() == intervals.pairs()
    assert decode(encode_marker(LOG, 2, 77)).through == 77


@pytest.mark.parametrize(
    "raw", [b"", b"\xc3\x01", b"\xc3\x01" + bytes(20), b"{}", encode_marker(LOG, 0, 5)[:-1]]
)
def test_garbage_is_an_index_record_error(raw: bytes) -> None:
    with pytest.raises(IndexRecordError):
        decode(raw)


def test_unordered_intervals_are_refused() -> None:
    with pytest.raises(IndexRecordError, match="sorted"):
        decode(encode_intervals(LOG, 0, Intervals([10, 5], [20, 8])))


@pytest.mark.parametrize(
    ("key", "prefix"),
    [
        (b"run/bench/model/3/0", b"run/bench/model/"),
        (b"run/bench/model/garbage", b"run/bench/model/"),
        (b"run/bench/model", None),
        (b"no-slash", None),
        (None, None),
    ],
)
def test_the_run_prefix_of_a_key_is_what_readers_filter_by(
    key: bytes | None, prefix: bytes | None
) -> None:
    assert run_prefix(key) == prefix


def test_close_ranges_are_read_in_one_go() -> None:
    assert _merged([(0, 10), (10 + READ_GAP - 1, 5000), (9000, 9001)]) == [
        (0, 5000),
        (9000, 9001),
    ]
