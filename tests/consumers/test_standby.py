"""Standby replicas, two aggregators of one group in one process (each with a state directory
of its own and one standby replica): each keeps a warm copy of every partition the other
serves, the same bytes as the other's store once idle; a hand-over reads only the tail."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from rocksdict import AccessType, Options, Rdict

from resultlog.consumers.aggregator import Aggregator
from resultlog.consumers.aggregator._metrics import AggregatorMetrics
from resultlog.consumers.aggregator.standby._copy import Released, WarmCopy
from resultlog.consumers.aggregator.store import (
    KafkaChangelog,
    LogIdentity,
    StoreOpener,
    open_store,
    partition_path,
)
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.aggregator import started
from tests.support.aggregator_process import two_epoch_records
from tests.support.kafka import drop_topics, topic_settings, write_many
from tests.support.records import make_record
from tests.support.summaries import bare, expected
from tests.support.waiting import wait_for

RUNS = [RunKey(f"standby-{i}", "arith", "openai/gpt-4o") for i in range(6)]
DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def replicated(kafka_bootstrap: str, unique_name: str) -> Iterator[Settings]:
    """This test's topics, one standby replica, flushing often."""
    made = topic_settings(
        kafka_bootstrap,
        unique_name,
        partitions=4,
        aggregator_standby_replicas=1,
        aggregator_save_interval_s=0.5,
    )
    yield made
    drop_topics(made)


def instance(
    settings: Settings, root: Path, name: str
) -> contextlib.AbstractContextManager[Aggregator]:
    """A started aggregator with static membership `name`, its state under root/name."""
    return started(settings, root / name, name)


def served(aggregator: Aggregator) -> set[int]:
    return {p.partition for p in aggregator.health().partitions}


def warm(aggregator: Aggregator) -> dict[int, int]:
    """Per partition kept warm: changelog records behind."""
    return {s.partition: s.behind for s in aggregator.health().standby}


def each_keeps_the_other_warm(a: Aggregator, b: Aggregator, partitions: int) -> bool:
    ready = a.health().ready and b.health().ready
    split = served(a) | served(b) == set(range(partitions)) and not served(a) & served(b)
    return (
        ready
        and split
        and warm(a) == dict.fromkeys(served(b), 0)
        and warm(b) == dict.fromkeys(served(a), 0)
    )


def held(aggregator: Aggregator, partition: int) -> dict[bytes, object]:
    """Every entry of a partition's store as its holder reads it (its unlogged writes are in
    memtables no other reader sees)."""
    shared = aggregator._shared
    with shared.lock:
        store = shared.state.partitions[partition].store
        assert store is not None
        return dict(store.items(b""))


def stored(path: Path) -> dict[bytes, object]:
    """Every entry of a store, read without taking it from its holder."""
    db = Rdict(str(path), Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        return {key: value for key, value in db.items() if isinstance(key, bytes)}  # raw mode
    finally:
        db.close()


def test_each_instance_keeps_a_copy_of_the_others_partitions_equal_to_its_store(
    replicated: Settings, tmp_path: Path
) -> None:
    write_many(replicated, two_epoch_records(RUNS, range(40)))
    with instance(replicated, tmp_path, "a") as a, instance(replicated, tmp_path, "b") as b:
        wait_for(lambda: each_keeps_the_other_warm(a, b, 4), "warm copies of each other's")
        write_many(replicated, two_epoch_records(RUNS, range(40, 60)))
        for run_key in RUNS:
            want = expected(replicated, run_key)
            owner = a if a.lookup(run_key).assigned else b
            wait_for(lambda: bare_lookup(owner, run_key) == want, f"{run_key} served")  # noqa: B023
        wait_for(lambda: each_keeps_the_other_warm(a, b, 4), "the copies caught up again")
        for keeper, owner in (("a", b), ("b", a)):
            for partition in served(owner):
                copy = partition_path(tmp_path / keeper, replicated.results_topic, partition)
                assert stored(copy), copy
                wait_for(lambda: stored(copy) == held(owner, partition), f"{copy} equal")  # noqa: B023


def test_a_leaving_instances_partitions_are_handed_over_reading_only_the_tail(
    replicated: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="resultlog")
    write_many(replicated, two_epoch_records(RUNS, range(40)))
    with instance(replicated, tmp_path, "b") as b:
        with instance(replicated, tmp_path, "a") as a:
            wait_for(lambda: each_keeps_the_other_warm(a, b, 4), "warm copies of each other's")
            moved = served(a)
            caplog.clear()
        wait_for(lambda: b.health().ready and served(b) == set(range(4)), "every partition")
        for run_key in RUNS:
            assert bare_lookup(b, run_key) == expected(replicated, run_key)
        handed = {int(p) for p in re.findall(r"warm copy of \S+\[(\d+)\] over", caplog.text)}
        assert handed == moved
        changelog = re.escape(replicated.changelog_topic)
        tails = re.findall(rf"read {changelog}\[\d+\] from offset (\d+)", caplog.text)
        assert all(int(start) > 0 for start in tails), caplog.text  # never from the start
        assert not b.health().standby  # alone in the group: nothing to keep warm


def bare_lookup(aggregator: Aggregator, run_key: RunKey) -> object:
    found = aggregator.lookup(run_key)
    return None if found.summary is None else bare(found.summary)


def test_a_copy_released_mid_restore_is_finished_by_the_open_path(
    kafka_bootstrap: str, unique_name: str, tmp_path: Path
) -> None:
    """A copy handed over between two batches of its changelog read (its store says a
    restore began): the open path reads on from where it began, equal to a full replay."""
    settings = topic_settings(kafka_bootstrap, unique_name, partitions=1)
    runs = [RunKey(f"long-{i}", "arith", "openai/gpt-4o") for i in range(6)]
    try:
        write_many(settings, records(runs, 5000), window=2000)  # ~90k changelog records
        with instance(settings, tmp_path, "a") as a:
            wait_for(lambda: a.health().ready, "a caught up")
        kafka = KafkaConnection(settings)
        cluster_id, topic_id = kafka.topic_identity(settings.results_topic)
        identity = LogIdentity(cluster_id, settings.results_topic, topic_id, 1)
        changelog = KafkaChangelog(kafka)
        end = len(runs) * 10_000
        root = tmp_path / "b"
        copy = WarmCopy(0, "a")
        copy.store = open_store(root, identity, 0, (0, end), max_age_ms=DAY_MS, cache_keys=1).store
        store = copy.store

        def release_once_restoring() -> None:
            wait_for(lambda: (meta := store.meta()) is not None and meta.restoring, "a batch")
            copy.releasing = True

        releaser = threading.Thread(target=release_once_restoring)
        releaser.start()
        with pytest.raises(Released):
            copy.tail(changelog, identity)
        releaser.join()
        meta = store.meta()
        assert meta is not None and meta.restoring and meta.changelog_offset == 0
        store.close()
        changelog.close()
        opener = StoreOpener(
            kafka, AggregatorMetrics(lambda: (a.health(), 0)), 1, root=root, max_age_ms=DAY_MS
        )
        try:
            found, _ = opener.open(0, (0, end))
            assert found.refused is None and found.next_offset == end
            for run_key in runs:
                assert bare(found.folds[run_key].summary()) == expected(settings, run_key)
            found.store.close()
        finally:
            opener.close()
    finally:
        drop_topics(settings)


def records(runs: list[RunKey], samples: int) -> list[SampleResult]:
    """Two epochs of each of `samples` samples of each run."""
    return [
        make_record(i, epoch, "CI"[(i + epoch) % 2], run_key=run_key, dataset_size=samples)
        for run_key in runs
        for i in range(samples)
        for epoch in range(2)
    ]
