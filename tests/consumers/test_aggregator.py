"""The aggregator against a real broker: it agrees with the fold, survives kills and rebalances."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import threading
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from resultlog.consumers import fold_records, replay_run
from resultlog.consumers.aggregator import Aggregator
from resultlog.consumers.aggregator._state import AggregatorState
from resultlog.kafka import KafkaConnection
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.model_client import ModelClient
from resultlog.producer.offline import Behavior, ModelServer
from resultlog.producer.store import KafkaResultStore
from resultlog.schemas import RecordId, RunKey, encode_key, partition_for
from resultlog.settings import Settings
from tests.support.aggregator import held, path, served
from tests.support.cli import child_env, cli_argv
from tests.support.kafka import produce_raw, run_partition, write, write_many
from tests.support.records import RUN_KEY, make_record
from tests.support.runs import run_with
from tests.support.summaries import bare, converged, expected, published
from tests.support.waiting import DEADLINE_S, wait_for

# -- tests ----------------------------------------------------------------------------------


async def test_worker_aggregator_and_replay_agree_field_for_field(
    settings: Settings,
    kafka_store: KafkaResultStore,
    model_client: ModelClient,
    model_server: ModelServer,
    base_url: str,
) -> None:
    bench = limit_samples(arith(), 8)
    model_server.override(bench.samples()[2].id, 1, Behavior(status=429))
    runs = [("r1", "offline/arith-1"), ("r2", "openai/gpt-4o")]
    from_worker = {}
    for run_id, model in runs:
        from_worker[run_id] = await run_with(
            bench, model_client, kafka_store, run_id, model=model, epochs=2
        )
    for run_id, model in runs:
        run_key = RunKey(run_id, "arith", model)
        want = await asyncio.to_thread(expected, settings, run_key)
        assert want["records"] == 16 and want["degraded_records"] == 1
        # Worker, replay and (below) the aggregator agree field for field.
        assert bare(from_worker[run_id].summary) == want
        replayed = await asyncio.to_thread(replay_run, KafkaConnection(settings), run_key)
        assert bare(replayed.summaries[run_key]) == want
        await asyncio.to_thread(
            wait_for, lambda k=run_key, w=want: served(base_url, k) == w, "HTTP"
        )
        await asyncio.to_thread(
            wait_for, lambda k=run_key, w=want: converged(settings, {k: w}), "topic"
        )


def test_a_degraded_record_replaced_by_a_completed_one_moves_the_summary(
    settings: Settings, base_url: str
) -> None:
    write(settings, [make_record(i, 0) for i in range(1, 4)])
    write(settings, [make_record(0, 0, "S", degraded=True)])
    first = wait_for(
        lambda: (s := served(base_url, RUN_KEY)) and s["records"] == 4 and s,
        "the degraded record",
    )
    assert first["degraded_records"] == 1 and first["skipped_questions"] == 1
    assert bare(first) == expected(settings, RUN_KEY)

    write(settings, [make_record(0, 0, "C", created_offset_ms=1000)])
    want = expected(settings, RUN_KEY)
    assert want["degraded_records"] == 0 and want["correct_answers"] == 4
    wait_for(lambda: served(base_url, RUN_KEY) == want, "the completed record over HTTP")
    wait_for(lambda: converged(settings, {RUN_KEY: want}), "the completed record on the topic")


def test_tombstones_remove_keys_and_an_emptied_run_disappears(
    settings: Settings, base_url: str
) -> None:
    write(settings, [make_record(0, 0), make_record(1, 0)])
    wait_for(lambda: (s := served(base_url, RUN_KEY)) and s["records"] == 2, "two records")
    home = run_partition(settings, RUN_KEY)
    assert produce_raw(settings, [(encode_key(RUN_KEY, 1, 0), None, home)]) == []
    wait_for(lambda: (s := served(base_url, RUN_KEY)) and s["records"] == 1, "the tombstone")
    assert produce_raw(settings, [(encode_key(RUN_KEY, 0, 0), None, home)]) == []
    wait_for(lambda: httpx.get(base_url + path(RUN_KEY)).status_code == 404, "the run to go")
    wait_for(lambda: published(settings).get(RUN_KEY, "absent") is None, "a summary tombstone")


def test_state_serves_caught_up_partitions_with_summaries_computed_on_request() -> None:
    state = AggregatorState(num_partitions=3)
    state.joined = state.running = True
    partition = partition_for(RUN_KEY, 3)
    state.assign(partition, low=0, high=10)
    for other in set(range(3)) - {partition}:
        state.assign(other, low=0, high=0)
    now = datetime.now(UTC)
    state.put(partition, 0, RecordId(RUN_KEY, 0, 0), make_record(0, 0))
    rebuilding = state.lookup(RUN_KEY, now, compute=False)
    assert rebuilding is not None and rebuilding.rebuilding and rebuilding.summary is None
    assert not state.health().ready and state.changed(now) == ([], True)

    state.put(partition, 9, RecordId(RUN_KEY, 1, 0), make_record(1, 0))
    assert state.health().ready
    assert state.changed(now) == ([], False)  # stale: published once computed
    assert state.lookup(RUN_KEY, now, compute=False) is None  # a wish, not a fold
    jobs = state.take_jobs(now)
    assert len(jobs) == 1 and state.wanted == {}
    state.cache_summaries(jobs, [job.compute() for job in jobs])
    found = state.lookup(RUN_KEY, now, compute=False)
    assert found is not None and found.summary is not None and found.summary.records == 2
    assert found.summary.as_of is not None and found.summary.as_of.offsets == {str(partition): 10}
    assert state.summaries(now, compute=False) == [found.summary]
    pending, finished = state.changed(now)
    assert [key for key, _ in pending] == [RUN_KEY] and finished
    assert state.changed(now) == ([], True)  # nothing changed since


@pytest.mark.slow  # SIGKILL and a restart
def test_sigkill_during_ingestion_then_restart_converges(settings: Settings) -> None:
    runs = [RunKey(f"kill-{i}", "arith", "openai/gpt-4o") for i in range(3)]
    batches = [
        [
            make_record(s, e, "CI"[s % 2], run_key=k, dataset_size=1000)
            for k in runs
            for s in range(lo, lo + 250)
            for e in range(2)
        ]
        for lo in (0, 250, 500)
    ]
    write_many(settings, batches[0])
    first = _start_cli(settings)
    try:
        wait_for(lambda: _served_records(first.url, runs) > 0, "ingestion to start")
        writer = _in_thread(lambda: write_many(settings, batches[1]))
        wait_for(lambda: _served_records(first.url, runs) > len(batches[0]), "more ingestion")
        first.kill()
        writer()
        write_many(settings, batches[2])
    finally:
        first.kill()
    second = _start_cli(settings)
    try:
        want = {k: expected(settings, k) for k in runs}
        assert [w["records"] for w in want.values()] == [1500] * 3
        wait_for(lambda: {k: served(second.url, k) for k in runs} == want, "HTTP of every run")
        wait_for(lambda: converged(settings, want), "the summaries topic")
        assert second.stop() == 0
    finally:
        second.kill()


def test_two_instances_share_partitions_and_survive_a_rebalance(settings: Settings) -> None:
    runs = [RunKey(f"pair-{i}", "arith", "m") for i in range(8)]
    records = [make_record(s, e, run_key=k) for k in runs for s in range(20) for e in range(2)]
    write_many(settings, records[::2])
    first = Aggregator(KafkaConnection(settings), publish_interval_s=0.05)
    second = Aggregator(KafkaConnection(settings), publish_interval_s=0.05)
    first.start()
    try:
        wait_for(lambda: _owned(first) == set(range(settings.partitions)), "first to own all")
        second.start()
        wait_for(lambda: _owned(first) and _owned(second) and _split(first, second), "a split")
        write_many(settings, records[1::2])
        first.stop()
        wait_for(lambda: _owned(second) == set(range(settings.partitions)), "second to own all")
        # Every key was written once: the fold of what was written is the fold of the topic.
        want = {k: bare(fold_records([r for r in records if r.run_key == k])) for k in runs}
        wait_for(lambda: {k: held(second, k) for k in runs} == want, "the second's summaries")
        wait_for(lambda: converged(settings, want), "the summaries topic")
    finally:
        first.stop()
        second.stop()
    assert first.failure is None and second.failure is None


# -- private helpers ------------------------------------------------------------------------


def _owned(aggregator: Aggregator) -> set[int]:
    health = aggregator.health()
    return {p.partition for p in health.partitions} if health.ready else set()


def _split(first: Aggregator, second: Aggregator) -> bool:
    one, two = _owned(first), _owned(second)
    return not one & two and len(one | two) == 3


def _served_records(base_url: str, runs: list[RunKey]) -> int:
    try:
        return sum((served(base_url, k) or {"records": 0})["records"] for k in runs)
    except httpx.HTTPError:
        return 0


def _in_thread(work: Callable[[], None]) -> Callable[[], None]:
    """Run `work` in a thread; the returned function joins it and re-raises its error."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            work()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()

    def join() -> None:
        thread.join(DEADLINE_S)
        if errors:
            raise errors[0]

    return join


class _Cli:
    """A `resultlog aggregator` child process serving on a free port."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(20)


def _start_cli(settings: Settings) -> _Cli:
    # Static membership: the restarted process takes the killed one's partitions at once.
    command = cli_argv("aggregator", "--http", "127.0.0.1:0", "--instance-id", "agg-0")
    process = subprocess.Popen(command, env=child_env(settings), stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("aggregator serving http://"):
        process.kill()
        pytest.fail(f"unexpected first line {line!r} (exit {process.wait(10)})")
    return _Cli(process, line.split()[-1])
