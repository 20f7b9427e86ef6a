"""Standby replicas under faults, as real processes: two aggregators of one group, a state
directory each and one standby replica; one is killed with SIGKILL, after its partitions'
copies caught up or while they are still catching up; the other serves every run, not
stale, equal to a full replay, having read only what its copies lacked."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.aggregator_process import (
    AggregatorProcess,
    health,
    member,
    two_epoch_records,
)
from tests.support.kafka import topic_settings, write_many
from tests.support.records import make_record
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

PARTITIONS = 4
SAMPLES = 2500  # per run, of two epochs: copies that take a while to catch up
SESSION_TIMEOUT_S = 10.0  # the aggregator's
RUNS = [RunKey(f"standby-{i}", "arith", "openai/gpt-4o") for i in range(8)]


@pytest.fixture
def replicated(kafka_bootstrap: str, unique_name: str, tmp_path: Path) -> Iterator[Settings]:
    """This test's topics, one standby replica, flushing often; state under tmp_path."""
    made = topic_settings(
        kafka_bootstrap,
        unique_name,
        partitions=PARTITIONS,
        aggregator_standby_replicas=1,
        aggregator_save_interval_s=0.5,
        aggregator_state_dir=tmp_path,
    )
    yield made
    with KafkaConnection(made) as kafka:
        kafka.admin().delete_topics(made.every_topic())


def served(agg: AggregatorProcess) -> set[int]:
    return {int(p) for p in health(agg)["partitions"]}


def each_keeps_the_other_warm(a: AggregatorProcess, b: AggregatorProcess) -> bool:
    """Both ready, the partitions split between them, each keeping the other's caught up."""
    of_a, of_b = health(a), health(b)
    if not (of_a["ready"] and of_b["ready"]):
        return False
    if set(of_a["partitions"]) | set(of_b["partitions"]) != {str(p) for p in range(PARTITIONS)}:
        return False
    return all(
        set(keeper["standby"]) == set(owner["partitions"])
        and all(copy["behind"] == 0 for copy in keeper["standby"].values())
        for keeper, owner in ((of_a, of_b), (of_b, of_a))
    )


def handed_over(log: str) -> dict[int, str]:
    """Per partition whose warm copy was handed over: what the copy held (a changelog
    offset, "mid-restore from N" or "none")."""
    found = re.findall(r"warm copy of \S+\[(\d+)\] over at changelog offset (.+) of \d+", log)
    return {int(p): held for p, held in found}


def resumed(log: str) -> dict[int, str]:
    """Per partition resumed from a store under this instance's state directory: the
    results offset it held."""
    found = re.findall(r"resumed \S+\[(\d+)\] from \S+: \d+ runs up to offset (\d+)", log)
    return {int(p): offset for p, offset in found}


def changelog_reads_after_hand_over(settings: Settings, log: str) -> list[int]:
    """The changelog offsets the restores started reading from, after the first hand-over."""
    marks = [log.find(mark) for mark in ("warm copy of", "no longer keeping")]
    after = log[min((at for at in marks if at >= 0), default=0) :]
    topic = re.escape(settings.changelog_topic)
    return [int(start) for start in re.findall(rf"read {topic}\[\d+\] from offset (\d+)", after)]


def test_after_a_kill_9_the_other_serves_every_run_from_its_warm_copies(
    replicated: Settings,
) -> None:
    """Two instances, one standby replica each, one killed with SIGKILL just after a tail
    was written: the other serves every run, not stale, equal to a full replay."""
    write_many(replicated, two_epoch_records(RUNS, range(40)))
    with member(replicated, "b") as b:
        with member(replicated, "a", stop=signal.SIGKILL) as a:
            wait_for(lambda: each_keeps_the_other_warm(a, b), "warm copies of each other's")
            moved = served(a)
            write_many(replicated, two_epoch_records(RUNS, range(40, 46)))
        b.wait_equal(replicated, RUNS)
        assert served(b) == set(range(PARTITIONS))
        assert not health(b)["standby"]  # alone: nothing to keep warm
    # Handed over by the keeper, or (the keeper let the copy go once the dead member left
    # the group) resumed from the copy's store where it stood: never rebuilt from nothing.
    handed = {**resumed(b.stderr), **handed_over(b.stderr)}
    assert set(handed) >= moved, b.stderr[-3000:]
    assert all(held.isdecimal() and int(held) > 0 for held in handed.values()), handed
    starts = changelog_reads_after_hand_over(replicated, b.stderr)
    assert all(start > 0 for start in starts), b.stderr[-3000:]  # never from the start


def test_a_standby_whose_active_dies_mid_restore_is_handed_over_where_it_stands(
    replicated: Settings,
) -> None:
    """An instance killed with SIGKILL while the other's copies of its partitions are still
    catching up (the other frozen mid-restore until both sessions expired): the copies are
    handed over wherever they stand when the other takes the partitions, the restore reads
    the rest; every run equals a full replay."""
    runs = [RunKey(f"big-{i}", "arith", "openai/gpt-4o") for i in range(8)]
    write_many(replicated, _records(runs, SAMPLES), window=2000)
    with member(replicated, "a", stop=signal.SIGKILL) as a:
        a.wait_equal(replicated, runs)
        with member(replicated, "b") as b:
            moved = wait_for(lambda: _catching_up(a, b), "b's copies of a's partitions catching up")
            b.process.send_signal(signal.SIGSTOP)  # frozen mid-restore
            a.process.send_signal(signal.SIGKILL)
            time.sleep(SESSION_TIMEOUT_S + 2)  # both sessions expire: b rejoins alone
            b.process.send_signal(signal.SIGCONT)
            b.wait_equal(replicated, runs)
            assert served(b) == set(range(PARTITIONS))
    assert set(handed_over(b.stderr)) == moved, b.stderr[-3000:]


def _catching_up(a: AggregatorProcess, b: AggregatorProcess) -> set[int]:
    """The partitions of `a` that `b` keeps warm, as soon as its copies of all of them are
    listed: usually still behind, though an idle machine may catch up between two looks (the
    in-process test of `test_standby.py` hands a copy over mid-read every time)."""
    copies = health(b)["standby"]
    return {int(p) for p in copies} if set(copies) == set(health(a)["partitions"]) else set()


def _records(runs: list[RunKey], samples: int) -> list[SampleResult]:
    """Two epochs of each of `samples` samples of each run."""
    return [
        make_record(i, epoch, "CI"[(i + epoch) % 2], run_key=run_key, dataset_size=samples)
        for run_key in runs
        for i in range(samples)
        for epoch in range(2)
    ]
