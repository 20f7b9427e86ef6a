"""The command line as processes: long prompts, SIGTERM, and no silent no-ops."""

from __future__ import annotations

import json
import random
import signal
import string
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from resultlog.kafka import KafkaConnection
from resultlog.producer import live_leases
from resultlog.schemas import Codec, RunKey, RunSummary, encode_run_key, partition_for
from resultlog.settings import Settings
from tests.support.cli import cli_argv
from tests.support.processes import (
    durable,
    model_server,
    one_line_error,
    requests_in,
    start,
)
from tests.support.waiting import wait_for

MODEL = "offline/gpt-4o"


def run_args(run_id: str, benchmark: str = "arith", *options: str) -> list[str]:
    return ["run", benchmark, "--model", MODEL, "--run-id", run_id, "--json", *options]


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_argv(*args), env=env, capture_output=True, text=True, timeout=120)


def test_a_600_kb_prompt_completes_and_a_rerun_asks_nothing(
    tmp_path: Path, settings: Settings, cli_env: dict[str, str]
) -> None:
    filler = "".join(random.Random(11).choices(string.ascii_lowercase + " ", k=600_000))
    prompt = f"{filler}\nWhat is 2 + 3?"
    bench = tmp_path / "longctx.jsonl"
    lines = [{"id": "long-0", "input": prompt, "target": "5"}]
    lines += [
        {"id": f"short-{i}", "input": f"What is {i} + 1?", "target": str(i + 1)} for i in (1, 2)
    ]
    bench.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with model_server(tmp_path / "server", cli_env, "--error-rate", "0") as (url, log):
        args = run_args("long", str(bench), "--base-url", url)
        first = cli(cli_env, *args)
        assert first.returncode == 0, first.stderr
        asked = len(requests_in(log))
        again = cli(cli_env, *args)
        assert again.returncode == 0, again.stderr
        assert len(requests_in(log)) == asked == 3, "the re-run asked the model again"
    records = {r.sample_id: r for r in durable(settings, RunKey("long", "longctx", MODEL))}
    assert records["long-0"].input == prompt and records["long-0"].truncated is None
    assert json.loads(again.stdout)["records"] == 3


@pytest.mark.slow  # SIGTERM to a child and a resume
def test_sigterm_stops_a_run_that_then_resumes_without_paying_twice(
    tmp_path: Path, settings: Settings, cli_env: dict[str, str]
) -> None:
    run_key = RunKey("term", "arith", MODEL)
    with model_server(tmp_path / "server", cli_env, "--latency-ms", "100") as (url, log):
        args = run_args("term", "arith", "--limit", "60", "--epochs", "2", "--base-url", url)
        worker = start([*args, "--concurrency", "4"], cli_env)
        wait_for(lambda: len(durable(settings, run_key)) >= 20, "20 durable pairs", 90)
        assert worker.poll() is None, "the run ended before SIGTERM"
        worker.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        out, err = worker.communicate(timeout=30)
        assert time.monotonic() - signalled < 10
        assert worker.returncode == 128 + signal.SIGTERM and not out
        one_line_error((worker.returncode, err), "stopped by SIGTERM")
        assert live_leases(KafkaConnection(settings), run_key) == [], "the lease was released"

        kept = {(r.sample_id, r.epoch) for r in durable(settings, run_key) if not r.degraded}
        before = len(requests_in(log))
        resumed = cli(cli_env, *args)
        assert resumed.returncode == 0, resumed.stderr
        assert not kept & set(requests_in(log)[before:]), "a durable pair was asked again"
    assert len(durable(settings, run_key)) == 120


def summaries_on_topic(settings: Settings, run_key: RunKey) -> list[RunSummary]:
    """Every summary of the run key on the summaries topic, in offset order."""
    consumer = Consumer(
        {**settings.client_config(), "group.id": "summaries", "enable.partition.eof": True}
    )
    partition = partition_for(run_key, settings.partitions)
    consumer.assign([TopicPartition(settings.summaries_topic, partition, 0)])
    found = []
    while (message := consumer.poll(10)) is not None and message.error() is None:
        value = message.value()
        if message.key() == encode_run_key(run_key) and value is not None:
            found.append(Codec().decode_run_summary(value))
    consumer.close()
    return found


@pytest.mark.slow  # SIGTERM to a child and a resume
def test_sigterm_stops_the_aggregator_cleanly(settings: Settings, cli_env: dict[str, str]) -> None:
    run_key = RunKey("served", "arith", MODEL)
    assert cli(cli_env, *run_args("served", "arith", "--limit", "10")).returncode == 0
    aggregator = start(["aggregator", "--http", "127.0.0.1:0"], cli_env)
    try:
        assert aggregator.stdout is not None
        url = aggregator.stdout.readline().split()[-1]
        path = "/runs/served/arith/" + MODEL.replace("/", "%2F")
        wait_for(lambda: httpx.get(url + path, timeout=5).status_code == 200, "the run served")
    finally:
        aggregator.send_signal(signal.SIGTERM)
        _, err = aggregator.communicate(timeout=60)
    assert aggregator.returncode == 0, err
    assert err.strip().splitlines() == [
        "resultlog: aggregator stopped by SIGTERM; pending summaries published"
    ]
    assert summaries_on_topic(settings, run_key)[-1].records == 10


def test_a_range_past_the_dataset_is_an_error_not_an_empty_run(
    settings: Settings, cli_env: dict[str, str]
) -> None:
    done = cli(cli_env, *run_args("past", "arith", "--range", "2000:3000"))
    one_line_error(
        done, "range 2000:3000 selects no sample of arith, whose 1000 samples are 0:1000"
    )
    assert durable(settings, RunKey("past", "arith", MODEL)) == []


def test_replay_of_a_run_without_records_is_an_error(
    settings: Settings, cli_env: dict[str, str]
) -> None:
    args = ["replay", "--run-id", "never", "--benchmark", "arith", "--model", MODEL, "--json"]
    done = cli(cli_env, *args)
    text = f"run never / arith / {MODEL} has no records in {settings.results_topic}"
    assert one_line_error(done, text) == f"resultlog: error: {text}" and not done.stdout
