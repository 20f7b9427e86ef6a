"""The aggregator's state directory against a real broker: a restart with it reads only the
tail; while a partition restores, the summaries topic's summaries are served marked stale."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from resultlog.consumers import RunFold
from resultlog.consumers.aggregator import Aggregator
from resultlog.consumers.aggregator._state import AggregatorState
from resultlog.consumers.aggregator.store import StoreOpener
from resultlog.consumers.aggregator.web._html import runs_part
from resultlog.consumers.aggregator.web._source import summary_json
from resultlog.schemas import RecordId, RunKey, SampleResult, partition_for
from resultlog.settings import Settings
from tests.support.aggregator import held, metric, started
from tests.support.kafka import write_many
from tests.support.records import make_record
from tests.support.summaries import expected
from tests.support.waiting import wait_for

RUNS = [RunKey(f"state-{i}", "arith", "openai/gpt-4o") for i in range(4)]


def test_a_restart_with_its_state_dir_reads_only_the_tail(settings: Settings) -> None:
    state_dir = _state_dir(settings)
    write_many(settings, _records(range(0, 30)))
    with started(settings, state_dir) as aggregator:
        _wait_equal(aggregator, settings)
    tail = _records(range(30, 33))
    write_many(settings, tail)
    with started(settings, state_dir) as aggregator:
        _wait_equal(aggregator, settings)
        assert metric(aggregator, "records_consumed_total") == len(tail)
        assert metric(aggregator, "states_restored_total") == settings.partitions


def test_a_new_machine_serves_stale_summaries_while_it_restores_from_the_changelog(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_many(settings, _records(range(0, 20)))
    with started(settings, _state_dir(settings)) as aggregator:
        _wait_equal(aggregator, settings)  # its clean stop flushes and publishes
    release = threading.Event()
    restore = StoreOpener._restored

    def held_restore(*args: Any) -> Any:
        # The restore waits until the test saw what is served meanwhile.
        assert release.wait(60), "the test never released the restore"
        return restore(*args)

    monkeypatch.setattr(StoreOpener, "_restored", held_restore)
    new_machine = _state_dir(settings).with_name("new-machine")
    with started(settings, new_machine) as aggregator:
        try:
            wait_for(lambda: all(aggregator.lookup(k).stale for k in RUNS), "stale summaries")
            for run_key in RUNS:
                found = aggregator.lookup(run_key)
                assert found.summary is not None and found.rebuilding
                assert found.summary.records == expected(settings, run_key)["records"]
            health = aggregator.health()
            # The rebalance callback returned: the group is joined, the stores restore.
            assert health.joined and not health.ready
            assert set(health.as_json()["restoring"]) == {
                str(p) for p in range(settings.partitions)
            }
            assert "restoring partitions" in health.restoring_text()
        finally:
            release.set()
        _wait_equal(aggregator, settings)
        assert not any(aggregator.lookup(k).stale for k in RUNS)
        assert metric(aggregator, "states_restored_total") == settings.partitions
        assert metric(aggregator, "records_consumed_total") == 0


def test_a_rebuilding_partition_serves_the_topics_summary_marked_stale() -> None:
    state = AggregatorState(num_partitions=3)
    partition = partition_for(RUNS[0], 3)
    for number in range(3):
        state.assign(number, low=0, high=10 if number == partition else 0)
    now = datetime.now(UTC)
    published = _fold(RUNS[0]).summary()
    state.partitions[partition].stale = {RUNS[0]: published, RUNS[1]: None}
    found = state.lookup(RUNS[0], now, compute=True)
    assert found is not None and found.stale and found.rebuilding and found.summary == published
    page = state.page(now, compute=True)
    assert page is not None and page.summaries == [published]
    assert page.stale == frozenset({RUNS[0]})
    body = summary_json(published, stale=True)
    assert body.startswith(b'{"stale":true,"format_version"')
    html = runs_part(page.summaries, {}, benchmarks=[], models=[], query="", stale=page.stale)
    assert html.count('class="badge stale"') == 1
    state.put(partition, 9, RecordId(RUNS[0], 0, 0), _record(RUNS[0]))  # caught up
    found = state.lookup(RUNS[0], now, compute=True)
    assert found is not None and not found.stale and found.summary is not None
    assert found.summary.records == 1


# -- private helpers ------------------------------------------------------------------------


def _record(run_key: RunKey) -> SampleResult:
    return make_record(0, 0, run_key=run_key)


def _fold(run_key: RunKey) -> RunFold:
    folded = RunFold(run_key)
    folded.apply(_record(run_key))
    folded.apply(make_record(1, 0, run_key=run_key))
    return folded


def _records(indexes: range) -> list[SampleResult]:
    return [
        make_record(i, epoch, "CI"[(i + epoch) % 2], run_key=run_key, numeric=0.1 * (i % 7))
        for run_key in RUNS
        for i in indexes
        for epoch in range(2)
    ]


def _state_dir(settings: Settings) -> Path:
    assert settings.aggregator_state_dir is not None
    return settings.aggregator_state_dir / "machine"


def _wait_equal(aggregator: Aggregator, settings: Settings) -> None:
    want = {k: expected(settings, k) for k in RUNS}
    wait_for(lambda: aggregator.health().ready, "readiness")
    wait_for(lambda: {k: held(aggregator, k) for k in RUNS} == want, "replay's summaries")
