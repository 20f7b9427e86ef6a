"""The aggregator's saved state under faults, as real processes: a state directory deleted
while stopped or copied from another log, state (store and changelog) of a results topic
deleted and re-created since, a deleted changelog topic, and a SIGKILL in the middle of
writing, on the same machine or a new one, or in the middle of a restore from the changelog;
each ends equal to a full replay."""

from __future__ import annotations

import re
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from rocksdict import Options, Rdict

from resultlog.consumers.aggregator.store import MARKER_KEY, StoreMeta
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.aggregator import path
from tests.support.aggregator_process import (
    aggregator_process,
    recreate_results_topic,
    two_epoch_records,
)
from tests.support.kafka import (
    read_partition,
    run_partition,
    topic_settings,
    watermarks,
    write_many,
)
from tests.support.records import make_record
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

OLD = [RunKey(f"old-{i}", "arith", "openai/gpt-4o") for i in range(4)]
NEW = [RunKey(f"new-{i}", "arith", "openai/gpt-4o") for i in range(4)]
_KILL_ATTEMPTS = 6  # tries at killing a restore midway (a miss costs a restore, ~2 s)


@pytest.fixture
def fresh(kafka_bootstrap: str, unique_name: str, tmp_path: Path) -> Iterator[Settings]:
    """This test's topics, flushing often, with its state directories under tmp_path."""
    made = topic_settings(
        kafka_bootstrap,
        unique_name,
        aggregator_save_interval_s=0.5,
        aggregator_state_dir=tmp_path / "machine-a",
    )
    yield made
    with KafkaConnection(made) as kafka:
        kafka.admin().delete_topics(made.every_topic())


def test_a_state_dir_deleted_while_stopped_is_restored_from_the_changelog(
    fresh: Settings,
) -> None:
    write_many(fresh, two_epoch_records(OLD, range(30)))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, OLD)
    shutil.rmtree(_state_dir(fresh))
    tail = two_epoch_records(OLD, range(30, 33))
    write_many(fresh, tail)
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, OLD)
        assert agg.metric("states_restored_total") == fresh.partitions
        assert agg.metric("records_consumed_total") == len(tail)


def test_a_deleted_changelog_is_written_again_whole_and_restores_a_new_machine(
    fresh: Settings,
) -> None:
    write_many(fresh, two_epoch_records(OLD, range(30)))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, OLD)
    recreate_results_topic(fresh, fresh.changelog_topic)
    write_many(fresh, two_epoch_records(OLD, range(30, 33)))
    with aggregator_process(fresh) as agg:  # its store is good: it rewrites the changelog
        agg.wait_equal(fresh, OLD)
        assert agg.metric("states_restored_total") == fresh.partitions
    shutil.rmtree(_state_dir(fresh))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, OLD)
        assert agg.metric("states_restored_total") == fresh.partitions
        assert agg.metric("records_consumed_total") == 0


def test_a_state_dir_of_another_cluster_is_refused_and_rebuilt(fresh: Settings) -> None:
    write_many(fresh, two_epoch_records(OLD, range(30)))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, OLD)
    _rename_cluster(_state_dir(fresh), "another-cluster")
    write_many(fresh, two_epoch_records(OLD, range(30, 33)))
    with aggregator_process(fresh) as agg:  # its changelog is this cluster's: restored from it
        agg.wait_equal(fresh, OLD)
        assert agg.metric("states_ignored_total", reason="foreign_cluster") == fresh.partitions
    assert agg.warnings("foreign_cluster") == fresh.partitions


@pytest.mark.parametrize("keep_state_dir", [True, False], ids=["same machine", "new machine"])
def test_state_of_a_deleted_and_recreated_topic_is_never_restored(
    fresh: Settings, keep_state_dir: bool
) -> None:
    write_many(fresh, two_epoch_records(OLD, range(30)))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, OLD)
    recreate_results_topic(fresh)
    write_many(fresh, two_epoch_records(NEW, range(12)))
    if not keep_state_dir:
        shutil.rmtree(_state_dir(fresh))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, NEW)
        for run_key in OLD:
            assert httpx.get(agg.url + path(run_key), timeout=5).status_code == 404
        listed = {(s["run_id"]) for s in httpx.get(agg.url + "/runs", timeout=5).json()}
        assert listed == {k.run_id for k in NEW}
        assert agg.metric("states_restored_total") == 0
    assert agg.warnings("foreign_topic") >= 1, agg.stderr[-3000:]


@pytest.mark.parametrize("keep_state_dir", [True, False], ids=["same machine", "new machine"])
def test_sigkill_while_writing_the_store_then_restart_equals_replay(
    fresh: Settings, keep_state_dir: bool
) -> None:
    write_many(fresh, two_epoch_records(OLD, range(100)))
    tiny_cache = fresh.model_copy(update={"aggregator_cache_keys": 64})  # flushes all the time
    writer = threading.Thread(
        target=write_many, args=(fresh, two_epoch_records(OLD, range(100, 600)))
    )
    holding = {run_partition(fresh, run_key) for run_key in OLD}
    with aggregator_process(tiny_cache, stop=signal.SIGKILL) as agg:
        writer.start()
        # Each partition starts folding once its own restore ends: killed only once every
        # partition holding records has flushed (a marker on its changelog), mid-ingest.
        wait_for(
            lambda: agg.metric("records_consumed_total") > 1000 and _flushed(fresh, holding),
            "every partition flushed, ingestion under way",
        )
    writer.join(120)
    if not keep_state_dir:  # restored from a changelog whose last flush may be cut short
        shutil.rmtree(_state_dir(fresh))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, OLD)
        restored = agg.metric("states_restored_total")
        consumed = agg.metric("records_consumed_total")
    # Whatever the flush the kill cut short, each flushed partition resumes from its state
    # (its store and changelog on the same machine, its changelog alone on a new one).
    assert restored >= len(holding), agg.stderr[-3000:]
    assert consumed < len(two_epoch_records(OLD, range(600))), agg.stderr[-3000:]


def test_sigkill_in_the_middle_of_a_restore_then_restart_equals_replay(
    kafka_bootstrap: str, unique_name: str, tmp_path: Path
) -> None:
    # One partition whose changelog takes several of a restore's batches: each sample's
    # outcome changes twice, so the changelog holds three times what the state does.
    one = topic_settings(
        kafka_bootstrap, unique_name, partitions=1, aggregator_state_dir=tmp_path / "state"
    )
    try:
        runs = [RunKey(f"big-{i}", "arith", "openai/gpt-4o") for i in range(10)]
        for flip in (1, 0, 1):
            write_many(one, _two_epochs(runs, flip), window=2000)
        with aggregator_process(one) as agg:
            agg.wait_equal(one, runs)
        ((_, whole),) = watermarks(one, one.changelog_topic)  # the changelog's end
        # A kill once the first batch is written, before the last is. The restore may still
        # end between the look that saw it under way and the kill: then the store must say
        # it holds the whole changelog, and the next try kills earlier or later.
        for _ in range(_KILL_ATTEMPTS):
            shutil.rmtree(_state_dir(one))
            with aggregator_process(one, stop=signal.SIGKILL) as agg:
                # Looked at often, so seen under way near its start, long before its end.
                seen = wait_for(lambda: _restore(agg.url), "a restore", 120, every_s=0.005)
            left = _meta(_state_dir(one))
            meta = None if left is None else StoreMeta.decode(left)
            if meta is None or meta.restoring:
                break  # never trusted half done
            assert meta.changelog_offset == whole, left
        else:
            pytest.fail(f"none of {_KILL_ATTEMPTS} kills landed in the middle of a restore")
        assert seen == "under way", seen
        with aggregator_process(one) as agg:
            agg.wait_equal(one, runs)
            assert agg.metric("states_restored_total") == 1
            assert agg.metric("records_consumed_total") == 0  # restored whole, nothing re-read
    finally:
        with KafkaConnection(one) as kafka:
            kafka.admin().delete_topics(one.every_topic())


# -- private helpers ------------------------------------------------------------------------


def _state_dir(settings: Settings) -> Path:
    assert settings.aggregator_state_dir is not None
    return settings.aggregator_state_dir


def _two_epochs(runs: list[RunKey], flip: int) -> list[SampleResult]:
    """Two epochs of each of the runs' 1000 samples, their outcomes flipped by `flip`."""
    return [
        make_record(i, epoch, "CI"[(i + epoch + flip) % 2], run_key=run_key, dataset_size=1000)
        for run_key in runs
        for i in range(1000)
        for epoch in range(2)
    ]


def _restore(url: str) -> str | None:
    """How far the restores are: "under way" (one wrote a batch, more to read), "over" (every
    assigned partition's ended), or None (neither yet)."""
    health = httpx.get(url + "/healthz", timeout=5).json()
    if any(0 < p["read"] < p["of"] for p in health["restoring"].values()):
        return "under way"
    partitions = health["partitions"].values()
    return "over" if partitions and not any(p["restoring"] for p in partitions) else None


def _meta(root: Path) -> bytes | None:
    """The meta entry of the one partition store under `root` (None: none on disk)."""
    (store,) = [meta.parent for meta in root.rglob("CURRENT")]
    db = Rdict(str(store), Options(raw_mode=True))
    try:
        meta = db.get(MARKER_KEY)
        assert meta is None or isinstance(meta, bytes)
        return meta
    finally:
        db.close()


def _flushed(settings: Settings, partitions: set[int]) -> bool:
    """Whether each of these partitions' changelogs holds a flush's marker."""
    return all(
        any(r.key == MARKER_KEY for r in read_partition(settings, settings.changelog_topic, p))
        for p in partitions
    )


def _rename_cluster(root: Path, cluster_id: str) -> None:
    """Make every partition store under `root` say it was saved from another cluster."""
    stores = [meta.parent for meta in root.rglob("CURRENT")]
    assert stores
    for store in stores:
        db = Rdict(str(store), Options(raw_mode=True))
        try:
            meta = db[b"\x00meta"]
            assert isinstance(meta, bytes)
            db[b"\x00meta"] = re.sub(
                rb'"cluster_id": "[^"]*"', f'"cluster_id": "{cluster_id}"'.encode(), meta
            )
        finally:
            db.close()
