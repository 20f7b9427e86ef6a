"""Distributed workers under fire: three worker processes, a six-chunk run, one worker SIGKILLed
mid-chunk (and, on a three-broker cluster, a broker killed too). The run completes, no pair is
asked twice but those the killed worker had in flight, and the summary equals a one-process run.
"""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from multiprocessing.queues import Queue
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from resultlog.broker import LocalKafka
from resultlog.kafka import KafkaClientError, KafkaConnection
from resultlog.schemas import RunKey, SampleResult, partition_for
from resultlog.settings import Settings
from tests.support.audit import report
from tests.support.cli import child_env, cli_argv, run_cli
from tests.support.kafka import raw_run_records, topic_settings
from tests.support.waiting import wait_for
from tests.support.work import (
    MODEL,
    all_committed,
    assigned_members,
    comparable,
    last_json,
    model_server_process,
    records_of,
    requests_in,
    start_worker,
    work_env,
)

pytestmark = pytest.mark.faults

SAMPLES, EPOCHS, CHUNKS, WORKERS, CONCURRENCY = 60, 2, 6, 3, 2
RUN = ["--limit", str(SAMPLES), "--epochs", str(EPOCHS)]


def _by_worker(records: list[SampleResult], pid: int) -> list[SampleResult]:
    return [r for r in records if r.worker is not None and r.worker.pid == pid]


def _distributed_run_survives_a_killed_worker(
    settings: Settings, env: dict[str, str], tmp_path: Path, on_kill: Callable[[], None]
) -> dict[str, object]:
    """The scenario; `on_kill` runs right after the worker is killed. Returns fault figures."""
    group = env["RESULTLOG_WORK_GROUP"]
    run_args = ["arith", "--model", MODEL, *RUN]
    with model_server_process(tmp_path, env, latency_ms=200) as (base_url, log):
        workers = [start_worker(env, "--concurrency", str(CONCURRENCY)) for _ in range(WORKERS)]
        try:
            wait_for(lambda: assigned_members(settings, group) == WORKERS, "three members")
            submitted = run_cli(
                env,
                "submit",
                *run_args,
                "--run-id",
                "fan",
                "--chunks",
                str(CHUNKS),
                "--base-url",
                base_url,
            )
            assert (submitted.returncode, submitted.stdout.strip()) == (0, str(CHUNKS))
            victim = workers[0]
            wait_for(
                lambda: len(_by_worker(records_of(settings, "fan"), victim.pid)) >= 3,
                "the victim's first durable pairs",
            )
            victim.send_signal(signal.SIGKILL)
            victim.wait(10)
            asked_at_kill = set(requests_in(log))
            on_kill()
            wait_for(lambda: all_committed(settings, group), "every chunk to be done", 180)
        finally:
            for worker in workers:
                worker.send_signal(signal.SIGTERM)
            for number, worker in enumerate(workers):
                try:
                    _, stderr = worker.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    worker.kill()
                    _, stderr = worker.communicate(timeout=30)
                (tmp_path / f"worker-{number}-{worker.pid}.log").write_text(stderr)
        asked = requests_in(log)
        single = last_json(
            run_cli(
                env,
                "run",
                *run_args,
                "--run-id",
                "single",
                "--base-url",
                base_url,
                "--json",
                "--concurrency",
                "8",
            )
        )

    records = records_of(settings, "fan")
    assert Counter((r.sample_index, r.epoch) for r in records) == {
        (i, e): 1 for i in range(SAMPLES) for e in range(EPOCHS)
    }
    # The chunk the victim was running: some pairs are its, the rest another worker's.
    mine = _by_worker(records, victim.pid)
    interrupted = {r.chunk_index for r in mine} & {
        r.chunk_index for r in records if r.worker is None or r.worker.pid != victim.pid
    }
    assert len(interrupted) == 1, "the victim was not killed mid-chunk"
    (chunk,) = interrupted
    in_chunk = {(r.sample_id, r.epoch) for r in records if r.chunk_index == chunk}
    raw = raw_run_records(settings, RunKey("fan", "arith", MODEL))
    durable_from_victim = {
        (r.sample_id, r.epoch)
        for r in (KafkaConnection(settings).codec.decode_sample_result(x.value) for x in raw)
        if r.worker is not None and r.worker.pid == victim.pid and not r.degraded
    }
    twice = {pair for pair, count in asked.items() if count > 1}
    assert twice <= (in_chunk & asked_at_kill) - durable_from_victim, "a pair was paid twice"
    assert len(twice) <= CONCURRENCY + sum(r.degraded for r in records if r.chunk_index == chunk)

    replayed = last_json(
        run_cli(
            env, "replay", "--run-id", "fan", "--benchmark", "arith", "--model", MODEL, "--json"
        )
    )
    assert comparable(replayed) == comparable(single)
    status = last_json(
        run_cli(
            env, "status", "--run-id", "fan", "--benchmark", "arith", "--model", MODEL, "--json"
        )
    )
    assert status["chunks"]["done"] == CHUNKS
    return {"asked_twice": len(twice), "requests": sum(asked.values()), "chunk": chunk}


def test_a_worker_killed_mid_chunk_costs_only_its_pairs_in_flight(
    settings: Settings, cli_env: dict[str, str], tmp_path: Path, unique_name: str
) -> None:
    env = work_env(cli_env, f"{unique_name}.workers")
    figures = _distributed_run_survives_a_killed_worker(settings, env, tmp_path, lambda: None)
    report("workers-kill", **figures)


def _up_three(directory: Path) -> str:
    command = cli_argv("kafka", "up", "--brokers", "3", "--port", "0", "--dir", str(directory))
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _leader(admin: AdminClient, settings: Settings, run_key: RunKey) -> int | None:
    """The broker leading the run's results partition; None while a fresh topic's metadata
    does not name one yet."""
    topic = admin.list_topics(settings.results_topic, timeout=10).topics[settings.results_topic]
    partition = topic.partitions.get(partition_for(run_key, settings.partitions))
    return None if partition is None or partition.leader < 0 else partition.leader


# Three brokers to start, a failover and two runs: 158-400 s here with the 2 cores busy.
@pytest.mark.timeout(600)
def test_the_same_on_a_three_broker_cluster_with_a_broker_killed(
    kafka_dir: Path, tmp_path: Path
) -> None:
    bootstrap = _up_three(kafka_dir)
    settings = topic_settings(bootstrap, replication_factor=3, min_insync_replicas=2)
    env = work_env(child_env(settings), f"{settings.work_topic}.workers")
    kafka = LocalKafka(kafka_dir)
    run_key = RunKey("fan", "arith", MODEL)
    admin = KafkaConnection(settings).admin()
    leader = wait_for(lambda: _leader(admin, settings, run_key), "the results partition's leader")

    def kill_the_results_leader() -> None:
        kafka.stop_node(leader, kill=True)

    figures = _distributed_run_survives_a_killed_worker(
        settings, env, tmp_path, kill_the_results_leader
    )
    assert leader not in admin.list_topics(timeout=10).brokers
    report("workers-cluster-3", killed_broker=leader, **figures)


def _coordinator(admin: AdminClient, group: str) -> int | None:
    """The broker coordinating `group`; None while the cluster cannot say yet."""
    try:
        found = admin.describe_consumer_groups([group], request_timeout=10)[group]
        return int(found.result(timeout=15).coordinator.id)
    except Exception:  # a fresh cluster still loading its offsets topic
        return None


def _read_offsets_through(settings: Settings, out: Queue[object], seconds: float) -> None:
    """In a child process: read the work group's committed offsets over and over for
    `seconds` (saying so after the first answer), then report every answer or failure."""
    kafka = KafkaConnection(settings)
    answers: list[object] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            answers.append(
                kafka.committed_offsets(settings.work_group, settings.work_topic, [0, 1, 2])
            )
        except KafkaClientError as exc:
            answers.append(str(exc))
        if len(answers) == 1:
            out.put("reading")
    out.put(answers)


def _commit(group: Consumer, offsets: list[TopicPartition]) -> bool:
    """Commit `offsets`; False while a three-node cluster just started still settles its
    group coordinator (NOT_COORDINATOR and the like: librdkafka does not retry these)."""
    try:
        group.commit(offsets=offsets, asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() not in _COORDINATOR_SETTLING:
            raise
        return False
    return True


_COORDINATOR_SETTLING = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


def test_the_work_groups_offsets_are_read_through_a_killed_coordinator(
    kafka_dir: Path,
) -> None:
    """Reading the work group's committed offsets (as `status` and the tests do) while the
    group's coordinator is killed: the reader rides it out. librdkafka's admin request for
    them dereferences a consumer-group handle an admin client lacks on NOT_COORDINATOR, and
    the process died of SIGSEGV; the reader runs in a child process, so that would fail this
    test alone."""
    settings = topic_settings(_up_three(kafka_dir), replication_factor=3, min_insync_replicas=2)
    group = KafkaConnection(settings).offsets_consumer(settings.work_group)
    offsets = [TopicPartition(settings.work_topic, 1, 5)]
    wait_for(lambda: _commit(group, offsets), "a commit the group's coordinator accepts")
    group.close()
    admin = KafkaConnection(settings).admin()
    coordinator = wait_for(lambda: _coordinator(admin, settings.work_group), "the coordinator")
    spawn = multiprocessing.get_context("spawn")  # no librdkafka state forked along
    answers: Queue[object] = spawn.Queue()
    reader = spawn.Process(target=_read_offsets_through, args=(settings, answers, 30.0))
    reader.start()
    assert answers.get(timeout=120) == "reading"
    LocalKafka(kafka_dir).stop_node(coordinator, kill=True)
    reader.join(180)
    assert reader.exitcode == 0, f"the offsets reader died: exit code {reader.exitcode}"
    read = answers.get(timeout=10)
    assert isinstance(read, list) and read[-1] == {1: 5}, read
    failed = [answer for answer in read if isinstance(answer, str)]
    report(
        "group-offsets-coordinator-killed",
        coordinator=coordinator,
        reads=len(read),
        failed=len(failed),
    )
