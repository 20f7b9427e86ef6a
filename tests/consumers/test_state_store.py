"""The aggregator's state store: a disk-backed fold equals the in-memory one bit for bit, and a
store is resumed only when it names the exact log it is opened for."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resultlog.consumers import RunFold
from resultlog.consumers.aggregator.store import LogIdentity, Opened, open_store
from resultlog.consumers.aggregator.store._files import OPEN_PATHS
from resultlog.schemas import RunKey, SampleResult
from tests.support.records import make_record
from tests.support.strategies import extreme_records

IDENTITY = LogIdentity("cluster-a", "results", "topic-id-1", 3)
RUNS = [RunKey("r1", "arith", "m"), RunKey("r2", "arith", "m")]
DAY_MS = 24 * 3600 * 1000

# One step: remove (or apply) this record in run 0 or 1, then maybe flush or restart.
_steps = st.tuples(
    st.booleans(),
    extreme_records(),
    st.integers(0, 1),
    st.sampled_from(["none", "none", "none", "flush", "restart"]),
)


def _open(root: Path, end: int, cache_keys: int, identity: LogIdentity = IDENTITY) -> Opened:
    opened = open_store(root, identity, 0, (0, end), max_age_ms=DAY_MS, cache_keys=cache_keys)
    opened.store.identity = identity
    return opened


@settings(max_examples=100, deadline=None)
@given(st.lists(_steps, min_size=1, max_size=40), st.integers(1, 5))
def test_the_disk_backed_fold_equals_the_in_memory_fold_bit_for_bit(
    tmp_path_factory: pytest.TempPathFactory,
    steps: list[tuple[bool, SampleResult, int, str]],
    cache_keys: int,
) -> None:
    root = tmp_path_factory.mktemp("store")
    opened = _open(root, 0, cache_keys)
    store = opened.store
    memory = {run_key: RunFold(run_key) for run_key in RUNS}
    disk = {run_key: store.new_fold(run_key) for run_key in RUNS}
    for offset, (remove, record, which, then) in enumerate(steps):
        run_key = RUNS[which]
        for fold in (memory[run_key], disk[run_key]):
            if remove:
                fold.remove(record.sample_index, record.epoch)
            else:
                fold.apply(record.model_copy(update={"run_id": run_key.run_id}))
        store.touched(disk[run_key])
        if then == "flush" or store.flush_due():
            store.flush(offset + 1)
        elif then == "restart":  # a clean stop, then a start from what was saved
            store.flush(offset + 1)
            store.close()
            opened = _open(root, offset + 1, cache_keys)
            assert opened.refused is None and opened.next_offset == offset + 1
            store = opened.store
            disk = {k: opened.folds.get(k) or store.new_fold(k) for k in RUNS}
        for key in RUNS:
            assert len(disk[key]) == len(memory[key])
            assert disk[key].summary().model_dump_json() == memory[key].summary().model_dump_json()
            assert disk[key].shape == memory[key].shape
    store.close()


def test_an_unflushed_tail_is_not_restored(tmp_path: Path) -> None:
    opened = _open(tmp_path, 0, 100)
    fold = opened.store.new_fold(RUNS[0])
    records = [r.model_copy(update={"run_id": "r1"}) for r in _records(4)]
    fold.apply(records[0])
    opened.store.touched(fold)
    opened.store.flush(1)
    for record in records[1:]:
        fold.apply(record)  # never flushed: lost with the process
    opened.store._disk.db.close()  # as a SIGKILL would leave it, without the pending writes
    OPEN_PATHS.discard(opened.store.path)  # and with it the process that had it open
    again = _open(tmp_path, 4, 100)
    assert again.next_offset == 1
    first = RunFold(RUNS[0])
    first.apply(records[0])
    assert again.folds[RUNS[0]].summary() == first.summary()
    again.store.close()


def test_a_new_runs_entry_evicted_from_the_cache_is_read_back_from_disk(tmp_path: Path) -> None:
    # A run new to the store skips disk reads until one of its flushed entries is evicted.
    store = _open(tmp_path, 0, 1).store
    fold, memory = store.new_fold(RUNS[0]), RunFold(RUNS[0])
    records = [r.model_copy(update={"run_id": "r1"}) for r in _records(3)]
    again = records[0].model_copy(update={"value": "I", "created_at": records[2].created_at})
    for offset, record in enumerate([*records, again]):
        fold.apply(record)
        memory.apply(record)
        store.touched(fold)
        store.flush(offset + 1)  # a cache of one key: the others now live on disk only
    assert len(fold) == len(memory) == 3
    assert fold.summary() == memory.summary()
    store.close()


@pytest.mark.parametrize(
    ("identity", "reason"),
    [
        (LogIdentity("cluster-b", "results", "topic-id-1", 3), "foreign_cluster"),
        (LogIdentity("cluster-a", "results", "topic-id-2", 3), "foreign_topic"),
        (LogIdentity("cluster-a", "results", "topic-id-1", 6), "foreign_layout"),
    ],
)
def test_a_store_of_another_log_is_refused_and_emptied(
    tmp_path: Path, identity: LogIdentity, reason: str
) -> None:
    opened = _open(tmp_path, 0, 100)
    fold = opened.store.new_fold(RUNS[0])
    fold.apply(_records(1)[0].model_copy(update={"run_id": "r1"}))
    opened.store.touched(fold)
    opened.store.flush(1)
    opened.store.close()
    refused = _open(tmp_path, 10, 100, identity)
    assert refused.refused is not None and refused.refused.reason == reason
    assert refused.folds == {} and refused.next_offset is None
    assert refused.store.empty()
    refused.store.close()


def test_a_store_past_the_end_is_refused(tmp_path: Path) -> None:
    opened = _open(tmp_path, 0, 100)
    opened.store.flush(50)
    opened.store.close()
    refused = _open(tmp_path, 10, 100)
    assert refused.refused is not None and refused.refused.reason == "beyond_end"
    refused.store.close()


def test_memory_holds_about_cache_keys_entries_and_no_flush_is_large(tmp_path: Path) -> None:
    store = _open(tmp_path, 0, 10_000).store
    runs = [RunKey(f"run-{n}", "arith", "m") for n in range(40)]
    memory = {run_key: RunFold(run_key) for run_key in runs}
    disk = {run_key: store.new_fold(run_key) for run_key in runs}
    most_pending = most_held = offset = 0
    for run_key in runs:  # 40 runs of 600 records, one after another: 2 keys each
        for index in range(300):
            for epoch in range(2):
                record = make_record(index, epoch, run_key=run_key, dataset_size=300, epochs=2)
                memory[run_key].apply(record)
                disk[run_key].apply(record)
                store.touched(disk[run_key])
                offset += 1
                most_pending = max(most_pending, store.pending)
                if store.flush_due():
                    store.flush(offset)
                most_held = max(most_held, store.held)
    assert most_pending <= 4096 + 1  # due at 4,096 keys, flushed at the next record boundary
    assert most_held <= 10_000 * 5 // 4 + 4096  # measured every quarter of the cache flushed
    for run_key in runs:
        assert disk[run_key].summary() == memory[run_key].summary()
    store.close()


def _records(count: int) -> list[SampleResult]:
    return [make_record(i, 0, run_key=RUNS[0]) for i in range(count)]
