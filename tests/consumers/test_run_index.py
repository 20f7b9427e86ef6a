"""The run index: readers of one run read its intervals and the tail, and equal a full scan."""

from __future__ import annotations

import logging

import pytest

from resultlog.consumers import read_run_records, run_keys_of
from resultlog.consumers._index_codec import MARKER_KEY
from resultlog.kafka import KafkaConnection
from resultlog.producer import purge_run
from resultlog.schemas import RunKey, SampleResult, partition_for, run_key_prefix
from resultlog.settings import Settings
from tests.support.aggregator import running
from tests.support.kafka import (
    TEST_PARTITIONS,
    delete_topic,
    produce_raw,
    read_partition,
    run_partition,
)
from tests.support.records import make_record
from tests.support.runindex import (
    full_scan,
    index_records,
    put,
    read_one_run,
    scans_logged,
    wait_indexed,
)

RUN = RunKey("indexed", "arith", "openai/gpt-4o")
OTHERS = 6000  # other runs' records between the run's two halves


def neighbours(run_key: RunKey, count: int) -> list[RunKey]:
    """Run keys of other runs in the run key's partition."""
    home = partition_for(run_key, TEST_PARTITIONS)
    found: list[RunKey] = []
    index = 0
    while len(found) < count:
        candidate = RunKey(f"other-{index}", "arith", "m")
        if partition_for(candidate, TEST_PARTITIONS) == home:
            found.append(candidate)
        index += 1
    return found


def ours(indexes: range, value: str = "C") -> list[SampleResult]:
    """Records of the run."""
    return [make_record(i, 0, value, run_key=RUN, epochs=1, dataset_size=200) for i in indexes]


def others(count: int, start: int = 0) -> list[SampleResult]:
    """`count` records of other runs of the partition."""
    keys = neighbours(RUN, 4)
    return [
        make_record((start + i) // 4, 0, run_key=keys[i % 4], epochs=1, dataset_size=None)
        for i in range(count)
    ]


def high(settings: Settings) -> int:
    """The high watermark of the run's partition."""
    found = read_partition(settings, settings.results_topic, run_partition(settings, RUN))
    return found[-1].offset + 1


@pytest.fixture
def history(settings: Settings) -> int:
    """The run's first half, many other records, its second half, indexed by an aggregator
    that then stops; returns the partition's end then."""
    put(settings, ours(range(50)))
    put(settings, others(OTHERS))
    put(settings, ours(range(50, 100)))
    end = high(settings)
    with running(settings):
        wait_indexed(settings, RUN, end)
    return end


def test_a_run_is_read_through_its_intervals_not_its_partition(
    settings: Settings, history: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    out = read_one_run(settings, RUN)
    assert out.guided and not scans_logged(caplog)
    assert out.latest == full_scan(settings, RUN)
    assert len(out.latest) == 100
    assert len(out.offsets) < OTHERS / 2  # the other runs' records in between were skipped
    entry = index_records(settings, run_partition(settings, RUN))[run_key_prefix(RUN)]
    assert entry is not None and entry.intervals is not None
    assert len(entry.intervals.pairs()) == 2


def test_records_past_indexed_through_are_read_from_the_tail(
    settings: Settings, history: int
) -> None:
    # The aggregator is down: the index stops at `history`, the run goes on past it.
    put(settings, others(500, start=OTHERS))
    put(settings, ours(range(90, 120), "I"))
    out = read_one_run(settings, RUN)
    assert out.guided
    assert out.latest == full_scan(settings, RUN)
    assert len(out.latest) == 120
    assert min(o for o in out.offsets if o >= history) == history  # the whole tail is read


def test_without_an_index_topic_readers_scan_and_say_so_once(
    settings: Settings, history: int, caplog: pytest.LogCaptureFixture
) -> None:
    delete_topic(settings, settings.index_topic)
    caplog.set_level(logging.INFO)
    out = read_one_run(settings, RUN)
    assert not out.guided
    assert out.latest == full_scan(settings, RUN)
    assert len(scans_logged(caplog)) == 1
    with KafkaConnection(settings) as kafka:
        assert len(read_run_records(kafka, RUN).records) == 100


@pytest.mark.parametrize("garbage", [b"", b"\xc3\x01garbage", b"not avro at all"])
def test_a_corrupt_entry_or_marker_means_a_full_scan(
    settings: Settings, history: int, garbage: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    partition = run_partition(settings, RUN)
    for key in (run_key_prefix(RUN), MARKER_KEY):
        produce_raw(settings, [(key, garbage, partition)], settings.index_topic)
        caplog.clear()
        caplog.set_level(logging.INFO)
        out = read_one_run(settings, RUN)
        assert not out.guided and len(scans_logged(caplog)) == 1
        assert out.latest == full_scan(settings, RUN)


def test_a_run_without_an_entry_is_read_whole(settings: Settings, history: int) -> None:
    stranger = RunKey("never-indexed", "arith", "m")
    put(settings, [make_record(0, 0, run_key=stranger, epochs=1)])
    out = read_one_run(settings, stranger)
    assert not out.guided
    assert out.latest == full_scan(settings, stranger) and len(out.latest) == 1


def test_purge_tombstones_the_entry_and_readers_still_agree(
    settings: Settings, history: int
) -> None:
    with KafkaConnection(settings) as kafka:
        assert purge_run(kafka, RUN) == 100
    partition = run_partition(settings, RUN)
    assert index_records(settings, partition)[run_key_prefix(RUN)] is None
    out = read_one_run(settings, RUN)
    assert out.latest == full_scan(settings, RUN) == {}


def test_the_run_keys_of_a_run_come_from_the_index_and_the_tails(
    settings: Settings, history: int, caplog: pytest.LogCaptureFixture
) -> None:
    later = RunKey(RUN.run_id, "other-benchmark", "m")  # written past indexed through
    put(settings, [make_record(0, 0, run_key=later, epochs=1)])
    caplog.set_level(logging.INFO)
    with KafkaConnection(settings) as kafka:
        assert run_keys_of(kafka, RUN.run_id) == sorted([RUN, later])
        # Only the run without an entry yet is read whole (to see if it is live).
        assert len(scans_logged(caplog)) == 1 and str(later) in scans_logged(caplog)[0]
        caplog.clear()
        purge_run(kafka, RUN)
        assert run_keys_of(kafka, RUN.run_id) == [later]
        delete_topic(settings, settings.index_topic)
        assert run_keys_of(kafka, RUN.run_id) == [later]
    # Purge read the run through its entry; then `later` is read whole once, and without
    # the index each partition is read whole.
    assert len(scans_logged(caplog)) == 1 + TEST_PARTITIONS
