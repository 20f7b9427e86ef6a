"""`resultlog submit` and `worker` as processes: bad input, pick-up, SIGTERM, a long chunk, and
chunk leases (no two writers of one run key's samples pay for them)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from resultlog.consumers._scan import watermark_offsets
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.aggregator import served, serving_aggregator
from tests.support.cli import run_cli
from tests.support.processes import one_line_error
from tests.support.summaries import bare
from tests.support.waiting import wait_for
from tests.support.work import (
    MODEL,
    all_committed,
    assigned_members,
    last_json,
    model_server_process,
    records_of,
    requests_in,
    work_env,
)


def _submit(run_id: str, base_url: str, *args: str) -> list[str]:
    return ["submit", "arith", "--model", MODEL, "--run-id", run_id, "--base-url", base_url, *args]


def _work_topic_is_empty(settings: Settings) -> bool:
    consumer = Consumer({**settings.client_config(), "group.id": "empty-probe"})
    try:
        return all(
            watermark_offsets(consumer, TopicPartition(settings.work_topic, p), 30)[1] == 0
            for p in range(settings.work_partitions)
        )
    finally:
        consumer.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "--chunks", "2"], "unknown benchmark 'nope'"),
        (["arith", "--chunks", "2", "--range", "5:2"], "range must satisfy 0 <= A < B"),
        (["arith", "--chunks", "2", "--range", "1000:1200"], "selects no sample of the 1000"),
        (["arith", "--chunks", "2", "--range", "990:2000"], "goes past the 1000 samples"),
        (["arith", "--chunks", "0"], "chunks must be between 1 and"),
        (["arith", "--chunks", "11", "--limit", "10"], "11 chunks for 10 samples"),
        (["arith", "--chunks", "2", "--base-url", "ftp://x"], "--base-url must be an http(s)"),
    ],
)
def test_bad_input_is_a_one_line_error_and_writes_nothing(
    args: list[str], message: str, settings: Settings, cli_env: dict[str, str]
) -> None:
    done = run_cli(cli_env, "submit", *args, "--model", "m", "--run-id", "bad")
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("resultlog: error:"), done.stderr
    assert message in lines[0]
    assert _work_topic_is_empty(settings)


def test_a_worker_started_before_submit_picks_the_work_up(
    settings: Settings,
    cli_env: dict[str, str],
    tmp_path: Path,
    unique_name: str,
    spawn: Callable[..., subprocess.Popen[str]],
) -> None:
    group, run_key = f"{unique_name}.workers", RunKey("picked", "arith", MODEL)
    env = work_env(cli_env, group)
    with model_server_process(tmp_path, env, latency_ms=5) as (base_url, log):
        worker = spawn(env, "--max-chunks", "3", "--concurrency", "4")
        wait_for(lambda: assigned_members(settings, group) == 1, "the worker to join")
        with serving_aggregator(settings) as (_, url):
            submitted = run_cli(env, *_submit("picked", base_url, "--chunks", "3", "--limit", "30"))
            assert (submitted.returncode, submitted.stdout.strip()) == (0, "3"), submitted.stderr
            _, stderr = worker.communicate(timeout=120)
            assert worker.returncode == 0, stderr
            assert "3 chunks run (30 pairs evaluated)" in stderr.splitlines()[-1]
            replayed = bare(last_json(run_cli(env, "replay", *_run_key_args("picked"), "--json")))
            wait_for(lambda: served(url, run_key) == replayed, "the aggregator to agree")
    assert replayed["records"] == replayed["expected_records"] == 30

    records = records_of(settings, "picked")
    for record in records:
        index = record.sample_index // 10
        assert (record.chunk_index, record.chunk_id) == (index, f"picked/chunk-{index}-of-3")
    assert set(requests_in(log).values()) == {1}
    assert all_committed(settings, group)
    status = last_json(run_cli(env, "status", *_run_key_args("picked"), "--json"))
    chunks = status["chunks"]
    assert (chunks["total"], chunks["done"], chunks["running"], chunks["waiting"]) == (3, 3, 0, 0)
    assert [(c["start"], c["end"], c["records"]) for c in chunks["list"]] == [
        (0, 10, 10),
        (10, 20, 10),
        (20, 30, 10),
    ]


def _run_key_args(run_id: str) -> list[str]:
    return ["--run-id", run_id, "--benchmark", "arith", "--model", MODEL]


@pytest.mark.slow  # worker processes, SIGTERM or a poll interval run out
def test_sigterm_abandons_the_chunk_and_loses_nothing_durable(
    settings: Settings,
    cli_env: dict[str, str],
    tmp_path: Path,
    unique_name: str,
    spawn: Callable[..., subprocess.Popen[str]],
) -> None:
    group = f"{unique_name}.workers"
    env = work_env(cli_env, group)
    with model_server_process(tmp_path, env, latency_ms=100) as (base_url, log):
        worker = spawn(env, "--concurrency", "2")
        wait_for(lambda: assigned_members(settings, group) == 1, "the worker to join")
        args = ("--chunks", "1", "--limit", "20", "--epochs", "2")
        assert run_cli(env, *_submit("term", base_url, *args)).returncode == 0
        wait_for(lambda: len(records_of(settings, "term")) >= 6, "some durable pairs")
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
        assert worker.returncode == 0, stderr
        assert stderr.splitlines()[-1].endswith("0 dead-lettered, 0 undecodable, 1 abandoned")
        durable = {(r.sample_id, r.epoch) for r in records_of(settings, "term") if not r.degraded}
        assert 6 <= len(durable) < 40
        assert not all_committed(settings, group), "an abandoned task must stay uncommitted"
        asked_before = requests_in(log)

        second = spawn(env, "--max-chunks", "1", "--concurrency", "2")
        _, stderr = second.communicate(timeout=120)
        assert second.returncode == 0, stderr
    asked = requests_in(log)
    assert all(asked[pair] == 1 for pair in durable), "a durable pair was asked again"
    again = {pair for pair, count in asked.items() if count > 1}
    assert again <= set(asked_before) - durable  # only pairs in flight (or degraded) at SIGTERM
    assert len(records_of(settings, "term")) == 40
    assert all_committed(settings, group)


@pytest.mark.slow  # worker processes, SIGTERM or a poll interval run out
def test_a_chunk_longer_than_max_poll_interval_keeps_its_group_membership(
    settings: Settings,
    cli_env: dict[str, str],
    tmp_path: Path,
    unique_name: str,
    spawn: Callable[..., subprocess.Popen[str]],
) -> None:
    group = f"{unique_name}.workers"
    # 6 s is the broker's shortest session; the chunk takes 8 pairs x 1 s, one at a time.
    env = work_env(cli_env, group, RESULTLOG_WORK_MAX_POLL_INTERVAL_MS="6000")
    with model_server_process(tmp_path, env, latency_ms=1000) as (base_url, log):
        worker = spawn(env, "--max-chunks", "1", "--concurrency", "1")
        wait_for(lambda: assigned_members(settings, group) == 1, "the worker to join")
        args = ("--chunks", "1", "--limit", "8")
        assert run_cli(env, *_submit("long", base_url, *args)).returncode == 0
        _, stderr = worker.communicate(timeout=120)
    assert worker.returncode == 0, stderr
    assert "maximum poll interval" not in stderr.lower(), stderr
    assert "1 chunks run (8 pairs evaluated), 0 dead-lettered, 0 undecodable, 0 abandoned" in stderr
    every = list(range(settings.work_partitions))
    assert [line for line in stderr.splitlines() if "revoked" in line] == [
        f"resultlog: INFO: revoked {every}"  # only when the worker leaves
    ]
    assert set(requests_in(log).values()) == {1} and len(requests_in(log)) == 8
    assert all_committed(settings, group)


def test_run_is_refused_while_a_worker_holds_the_chunk(
    settings: Settings,
    cli_env: dict[str, str],
    tmp_path: Path,
    unique_name: str,
    spawn: Callable[..., subprocess.Popen[str]],
) -> None:
    group = f"{unique_name}.workers"
    env = work_env(cli_env, group)
    # 40 pairs, 2 at a time, 3 s each: the chunk runs for a minute, `run` starts during it.
    with model_server_process(tmp_path, env, latency_ms=3000) as (base_url, log):
        worker = spawn(env, "--max-chunks", "1", "--concurrency", "2")
        wait_for(lambda: assigned_members(settings, group) == 1, "the worker to join")
        submitted = run_cli(env, *_submit("held", base_url, "--chunks", "1", "--limit", "40"))
        assert submitted.returncode == 0, submitted.stderr
        wait_for(lambda: len(requests_in(log)) >= 2, "the chunk to start")
        run = ["run", "arith", "--model", MODEL, "--run-id", "held", "--limit", "40"]
        refused = run_cli(env, *run, "--base-url", base_url, "--json")
        assert len(requests_in(log)) < 40, refused.stderr
        one_line_error(refused, "leased by host")
        _, stderr = worker.communicate(timeout=120)
        assert worker.returncode == 0, stderr
        asked = requests_in(log)
    assert len(records_of(settings, "held")) == 40
    assert len(asked) == 40 and set(asked.values()) == {1}, "a pair was asked twice"


@pytest.mark.slow  # worker processes, SIGTERM or a poll interval run out
def test_overlapping_submits_never_pay_a_pair_twice(
    settings: Settings,
    cli_env: dict[str, str],
    tmp_path: Path,
    unique_name: str,
    spawn: Callable[..., subprocess.Popen[str]],
) -> None:
    group = f"{unique_name}.workers"
    # Short leases: a chunk that finds its samples held claims again soon.
    env = work_env(cli_env, group, RESULTLOG_LEASE_TTL_S="6")
    # Chunks of 10 to 20 pairs, 2 at a time, 2 s each: both submits run at once.
    with model_server_process(tmp_path, env, latency_ms=2000) as (base_url, log):
        workers = [spawn(env, "--concurrency", "2") for _ in range(3)]
        wait_for(lambda: assigned_members(settings, group) == 3, "three members")
        for chunks in ("2", "4"):
            done = run_cli(env, *_submit("twice", base_url, "--chunks", chunks, "--limit", "40"))
            assert done.returncode == 0, done.stderr
        wait_for(lambda: all_committed(settings, group), "every chunk to be done", 180)
        for worker in workers:
            worker.terminate()
        reports = [worker.communicate(timeout=60)[1] for worker in workers]
        asked = requests_in(log)
    assert len(records_of(settings, "twice")) == 40
    assert len(asked) == 40 and set(asked.values()) == {1}, "a pair was asked twice"
    assert any("waits:" in report for report in reports), "no chunk met a held range"
