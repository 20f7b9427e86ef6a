"""Index-guided reads of one run equal full scans, whatever interleaving wrote the log.

Random steps write runs (sharing a partition, with shape changes and rewritten keys), purge
them, and run the aggregator that keeps the index, stopping it anywhere: before it caught
up, while it writes entries and markers, or once it is through. After every step each run's
guided read must equal a full scan of its partition; after a last full catch-up, every read
must also be guided. (Compaction under the index: tests/faults/test_compaction.py.)
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resultlog.kafka import KafkaConnection
from resultlog.producer import purge_run
from resultlog.schemas import RunKey, partition_for
from resultlog.settings import Settings
from tests.support.aggregator import running
from tests.support.kafka import TEST_PARTITIONS, drop_topics, topic_settings
from tests.support.records import make_record
from tests.support.runindex import full_scan, put, read_one_run, wait_indexed

pytestmark = [pytest.mark.faults, pytest.mark.timeout(1200)]


def _runs() -> list[RunKey]:
    """Three runs of one partition and one of another."""
    home = partition_for(RunKey("p-0", "arith", "m"), TEST_PARTITIONS)
    same = [
        k
        for i in range(200)
        if partition_for(k := RunKey(f"p-{i}", "arith", "m"), TEST_PARTITIONS) == home
    ]
    other = next(
        k
        for i in range(200)
        if partition_for(k := RunKey(f"q-{i}", "arith", "m"), TEST_PARTITIONS) != home
    )
    return [*same[:3], other]


RUNS = _runs()
SHAPES = [(1, None), (2, 40), (1, 45)]  # (epochs, dataset_size): a run's shape may change

write_step = st.tuples(
    st.just("write"),
    st.integers(0, len(RUNS) - 1),
    st.lists(st.integers(0, 39), min_size=1, max_size=40),
    st.sampled_from(range(len(SHAPES))),
)
purge_step = st.tuples(st.just("purge"), st.integers(0, len(RUNS) - 1))
# Seconds the aggregator runs before it is stopped; None: until it indexed every run's end.
aggregate_step = st.tuples(st.just("aggregate"), st.sampled_from([0.0, 0.2, 1.0, None]))
steps = st.lists(
    st.one_of(write_step, write_step, purge_step, aggregate_step), min_size=2, max_size=8
)


def _ends(config: Settings) -> dict[RunKey, int]:
    """Each written run's partition end (one past its latest record's offset)."""
    ends: dict[RunKey, int] = {}
    for run in RUNS:
        latest = full_scan(config, run)
        if latest:
            ends[run] = max(offset for offset, _ in latest.values()) + 1
    return ends


def _apply(config: Settings, step: tuple[Any, ...], round_: int) -> None:
    """Carry out one step."""
    if step[0] == "write":
        _, run, samples, shape = step
        epochs, size = SHAPES[shape]
        records = [
            make_record(
                s,
                0,
                "C" if (s + round_) % 2 else "I",
                run_key=RUNS[run],
                epochs=epochs,
                dataset_size=size,
                created_offset_ms=round_,
            )
            for s in samples
        ]
        put(config, records)
    elif step[0] == "purge":
        with KafkaConnection(config) as kafka:
            purge_run(kafka, RUNS[step[1]], force=True)
    else:
        seconds = step[1]
        with running(config):
            if seconds is None:
                for run, end in _ends(config).items():
                    wait_indexed(config, run, end)
            else:
                time.sleep(seconds)  # stopped wherever it got: mid-entries, mid-markers


def _assert_reads_equal_scans(config: Settings, *, guided: bool = False) -> None:
    """Each run's guided read equals a full scan; with `guided`, every run with live records
    was read through its index entry (a purged or never-written run has none)."""
    for run in RUNS:
        out, scan = read_one_run(config, run), full_scan(config, run)
        assert out.latest == scan, run
        assert out.guided or not (guided and scan), run


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(plan=steps)
def test_index_guided_reads_equal_full_scans_for_any_interleaving(
    kafka_bootstrap: str, plan: list[tuple[Any, ...]]
) -> None:
    config = topic_settings(kafka_bootstrap)
    try:
        for round_, step in enumerate(plan):
            _apply(config, step, round_)
            _assert_reads_equal_scans(config)
        _apply(config, ("write", 0, [0, 1, 2], 0), len(plan))  # the last run has something
        _apply(config, ("aggregate", None), len(plan))
        _assert_reads_equal_scans(config, guided=True)
    finally:
        drop_topics(config)
