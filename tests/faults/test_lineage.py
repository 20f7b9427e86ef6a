"""The changelog's lineage, as real processes on a real broker: a restore that does not reach
a "whole state from here" marker is refused and its partition rebuilt, and a changelog
deleted and re-created under a running aggregator gets each partition's state whole; every
run served ends equal to replay."""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from resultlog.consumers.aggregator.store import (
    ASIDE,
    GENERATION_KEY,
    MARKER_KEY,
    KafkaChangelog,
    StoreMeta,
)
from resultlog.consumers.aggregator.store._codec import totals_key, untag
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, encode_run_key, partition_for
from resultlog.settings import Settings
from tests.faults import test_aggregator_state as state_tests
from tests.support.aggregator import path
from tests.support.aggregator_process import (
    AggregatorProcess,
    aggregator_process,
    recreate_results_topic,
    two_epoch_records,
)
from tests.support.cli import child_env, run_cli
from tests.support.kafka import (
    produce_raw,
    read_partition,
    run_partition,
    write_many,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults
# The state faults' fixture: this test's topics, flushing often, its state under tmp_path.
fresh = state_tests.fresh
_state_dir = state_tests._state_dir

RUNS = [RunKey(f"lineage-{i}", "arith", "openai/gpt-4o") for i in range(4)]


def test_a_changelog_generation_without_its_whole_state_marker_is_refused_and_rebuilt(
    fresh: Settings,
) -> None:
    write_many(fresh, two_epoch_records(RUNS, range(30)))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, RUNS)
    partition = run_partition(fresh, RUNS[0])
    old = read_partition(fresh, fresh.changelog_topic, partition)
    state = [r for r in old if r.key and r.key[:1] != b"\x00"]  # no marker, nor fence
    entries = [(r.key or b"", untag(r.value)) for r in state]
    markers = [untag(r.value) for r in old if r.key == MARKER_KEY and r.value]
    assert entries and markers and any(r.key == GENERATION_KEY for r in old)
    recreate_results_topic(fresh, fresh.changelog_topic)
    # A partial generation on the new changelog: some of the state's keys and a flush marker
    # that names this very changelog, but no "whole state from here" marker before them.
    with KafkaConnection(fresh) as kafka:
        changelog = KafkaChangelog(kafka)
        try:
            last = StoreMeta.decode(markers[-1] or b"")
            marker = dataclasses.replace(last, changelog_id=changelog.topic_id)
            changelog.write(partition, entries[: len(entries) // 2], marker.encode())
        finally:
            changelog.close()
    shutil.rmtree(_state_dir(fresh))  # a new machine: everything comes from the changelog
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, RUNS)
        assert agg.metric("states_ignored_total", reason="no_generation") == 1
        # The same records delivered again (a producer's retry) change nothing.
        write_many(fresh, two_epoch_records(RUNS, range(5)))
        agg.wait_equal(fresh, RUNS)
    assert agg.warnings("no_generation") == 1, agg.stderr[-3000:]


def test_a_changelog_recreated_under_a_running_aggregator_restores_a_new_machine_whole(
    fresh: Settings,
) -> None:
    write_many(fresh, two_epoch_records(RUNS, range(30)))
    holding = {run_partition(fresh, run_key) for run_key in RUNS}
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, RUNS)
        recreate_results_topic(fresh, fresh.changelog_topic)
        # A resume rewrites a few pairs: the running aggregator's next flushes change only
        # those keys, yet each partition's state must reach the new changelog whole.
        write_many(fresh, two_epoch_records(RUNS, range(28, 33)))
        agg.wait_equal(fresh, RUNS)
        wait_for(lambda: _generations(fresh, holding), "every partition's state written whole")
    assert "was deleted and re-created" in agg.stderr, agg.stderr[-3000:]
    shutil.rmtree(_state_dir(fresh))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, RUNS)
        # The runs' partitions serve first; the partition that holds no run may still be
        # restoring its (empty) generation then: wait for it, the count itself unchanged.
        wait_for(
            lambda: agg.metric("states_restored_total") == fresh.partitions,
            "every partition restored from the new changelog",
        )
        assert agg.metric("records_consumed_total") == 0  # restored whole, nothing re-read
        write_many(fresh, two_epoch_records(RUNS, range(25, 30)))  # delivered again
        agg.wait_equal(fresh, RUNS)


def test_a_fenced_off_writers_late_totals_are_refused_and_the_partition_rebuilt(
    fresh: Settings,
) -> None:
    run = RUNS[0]
    partition = run_partition(fresh, run)
    other = _run_in(fresh, partition)
    write_many(fresh, two_epoch_records([run], range(5)))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, [run])
    totals = totals_key(run)
    early = [r for r in read_partition(fresh, fresh.changelog_topic, partition) if r.key == totals]
    write_many(fresh, two_epoch_records([run], range(5, 30)))
    with aggregator_process(fresh) as agg:  # the partition's next writer: fenced anew
        agg.wait_equal(fresh, [run])
        # The first writer's flush of the run's totals, queued in its producer when its
        # partition moved on, arrives now: 10 records' totals over the next writer's 60.
        late = produce_raw(fresh, [(totals, early[-1].value, partition)], fresh.changelog_topic)
        assert late == []
        write_many(fresh, two_epoch_records([other], range(3)))  # a flush marker after it
        agg.wait_equal(fresh, [run, other])
        wait_for(lambda: _marker_after(fresh, partition, totals), "a flush after the late write")
    shutil.rmtree(_state_dir(fresh))  # a new machine: everything comes from the changelog
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, [run, other])
        assert agg.metric("states_ignored_total", reason="fenced") == 1
    assert agg.warnings("fenced") == 1, agg.stderr[-3000:]


# -- private helpers ------------------------------------------------------------------------


def _run_in(settings: Settings, partition: int) -> RunKey:
    """A run key of its own whose records go to this partition."""
    return next(
        run_key
        for i in range(1000)
        if partition_for(run_key := RunKey(f"lineage-other-{i}", "arith", "m"), settings.partitions)
        == partition
    )


def _marker_after(settings: Settings, partition: int, key: bytes) -> bool:
    """Whether a flush marker follows the last record of this key in the changelog."""
    records = read_partition(settings, settings.changelog_topic, partition)
    last = max(r.offset for r in records if r.key == key)
    return any(r.key == MARKER_KEY and r.offset > last for r in records)


def _generations(settings: Settings, partitions: set[int]) -> bool:
    """Whether each of these partitions' changelogs holds a generation marker and, after it,
    a flush's marker."""
    for partition in partitions:
        keys = [r.key for r in read_partition(settings, settings.changelog_topic, partition)]
        if GENERATION_KEY not in keys or MARKER_KEY not in keys[keys.index(GENERATION_KEY) :]:
            return False
    return True


def test_a_purged_run_never_comes_back_from_a_store_older_than_the_changelogs_tombstones(
    fresh: Settings,
) -> None:
    doomed, kept = _purged_while_offline(fresh)
    with _restarted_without(fresh, doomed, kept) as agg:
        assert agg.metric("states_ignored_total", reason="stale_changelog") >= 1


def test_a_purge_compacted_away_while_a_young_store_was_offline_is_not_served_again(
    fresh: Settings,
) -> None:
    # The soak's seed 168132919: the changelog was compacted hard for a while (tombstones
    # kept for no time), then set back. A store saved before the purge is young by the
    # changelog's delete.retention.ms, yet the purge's deletes are gone from its changelog.
    doomed, kept = _purged_while_offline(fresh)
    _alter_changelog(fresh, {"delete.retention.ms": str(24 * 60 * 60 * 1000)})
    with _restarted_without(fresh, doomed, kept) as agg:
        assert agg.metric("states_ignored_total", reason="lost_records") >= 1
        assert agg.metric("states_ignored_total", reason="stale_changelog") == 0


def _purged_while_offline(fresh: Settings) -> tuple[RunKey, list[RunKey]]:
    """Machine a saves its store and stops; machine b holds the partition through a purge of
    one run; the changelog is then compacted until that run's records and tombstones are
    gone. The purged run, and the other runs of its partition."""
    doomed, kept = RUNS[0], [k for k in RUNS[1:] if _same_partition(fresh, k, RUNS[0])]
    write_many(fresh, two_epoch_records(RUNS, range(30)))
    with aggregator_process(fresh) as agg:  # machine a: its store is saved, then offline
        agg.wait_equal(fresh, RUNS)
    other = fresh.model_copy(update={"aggregator_state_dir": _state_dir(fresh).with_name("b")})
    with aggregator_process(other) as agg:  # machine b holds the partition during the purge
        agg.wait_equal(other, RUNS)
        _purge(fresh, doomed)
        wait_for(lambda: _status(agg.url, doomed) == 404, "the purge folded")
    _compact_hard(fresh, run_partition(fresh, doomed), encode_run_key(doomed))
    return doomed, kept


@contextmanager
def _restarted_without(
    fresh: Settings, doomed: RunKey, kept: list[RunKey]
) -> Iterator[AggregatorProcess]:
    """Machine a again, on its old store: the purged run is 404, and stays so, fresh or
    stale; the other runs of its partition are served."""
    with aggregator_process(fresh) as agg:
        if kept:
            agg.wait_equal(fresh, kept)
        wait_for(lambda: _status(agg.url, doomed) == 404, "the purged run gone")
        for _ in range(20):
            assert _status(agg.url, doomed) == 404
            time.sleep(0.1)
        yield agg


def _same_partition(settings: Settings, a: RunKey, b: RunKey) -> bool:
    return partition_for(a, settings.partitions) == partition_for(b, settings.partitions)


def _status(url: str, run_key: RunKey) -> int:
    return httpx.get(url + path(run_key), timeout=5).status_code


def _purge(settings: Settings, run_key: RunKey) -> None:
    done = run_cli(
        child_env(settings),
        *["purge", "--yes", "--run-id", run_key.run_id, "--benchmark", run_key.benchmark_id],
        *["--model", run_key.model],
    )
    assert done.returncode == 0, done.stderr


def _compact_hard(settings: Settings, partition: int, run: bytes) -> None:
    """Compact the changelog until no record of the run is left in the partition, its
    tombstones included: no tombstone kept (delete.retention.ms=0), short segments, any
    dirt worth a clean; filler records close segment after segment."""
    topic = settings.changelog_topic
    wanted = {
        "delete.retention.ms": "0",
        "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.001",
        "min.compaction.lag.ms": "0",
    }
    _alter_changelog(settings, wanted)

    def gone() -> bool:
        filler = [(b"\x00filler", b"%d" % time.monotonic_ns(), partition)]
        assert produce_raw(settings, filler, topic) == []
        return not any(
            r.key is not None and run in r.key for r in read_partition(settings, topic, partition)
        )

    wait_for(gone, "the run's records and tombstones compacted away", 180, every_s=0.3)


def _alter_changelog(settings: Settings, wanted: dict[str, str]) -> None:
    """Set configuration entries of the changelog topic."""
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in wanted.items()
    ]
    topic = settings.changelog_topic
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    with KafkaConnection(settings) as kafka:
        admin = kafka.admin()
        admin.incremental_alter_configs([resource])[resource].result(30)


def test_stores_rocksdb_refuses_are_moved_aside_and_the_partitions_restored(
    fresh: Settings,
) -> None:
    write_many(fresh, two_epoch_records(RUNS, range(30)))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, RUNS)
    stores = sorted(current.parent for current in _state_dir(fresh).rglob("CURRENT"))
    with_tables = [store for store in stores if any(store.glob("*.sst"))]
    assert len(stores) >= 2 and with_tables, stores
    garbled, missing = stores[0] if stores[0] != with_tables[0] else stores[1], with_tables[0]
    (garbled / "CURRENT").write_bytes(b"\x00garbage")  # does not end with a newline
    next(missing.glob("*.sst")).unlink()
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, RUNS)
        health = httpx.get(agg.url + "/healthz", timeout=5).json()
        assert health["ready"], health
        assert len(health["moved_aside"]) == 2, health
    aside = sorted(p.name for p in (_state_dir(fresh) / ASIDE).iterdir())
    assert len(aside) == 2, aside
    assert agg.warnings("corrupt") == 2, agg.stderr[-3000:]
