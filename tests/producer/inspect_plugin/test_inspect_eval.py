"""A real `inspect eval` publishing to a real broker, against the offline model server.

The repository's example task (8 sums, 2 epochs, `generate()`, `match()`) runs in a child
`inspect eval` process through Inspect's `openai-api/offline/arith` provider; the plugin is
loaded through its `inspect_ai` entry point, as for a user.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from inspect_ai.log import EvalLog, read_eval_log

from resultlog.consumers import replay_run
from resultlog.kafka import KafkaConnection
from resultlog.producer.inspect._payload import decode
from resultlog.producer.offline import Behavior, LoggedRequest, ModelServer
from resultlog.schemas import ScoreValue
from resultlog.settings import Settings
from tests.producer.inspect_plugin.support import (
    ALL_PAIRS,
    INSPECT,
    REPO,
    SAMPLES,
    TASK,
    TIMEOUT_S,
    durable_count,
    eval_command,
    fresh_settings,
    inspect_env,
    inspect_eval,
    latest,
    metrics,
    only_log,
    pairs,
    run_key,
    writes_per_key,
)
from tests.support.aggregator import path, running, serving
from tests.support.cli import child_env
from tests.support.kafka import raw_run_records
from tests.support.waiting import wait_for


@dataclass(frozen=True)
class Baseline:
    """An uninterrupted eval: its topics, the requests the model saw and Inspect's log."""

    settings: Settings
    done: subprocess.CompletedProcess[str]
    requests: list[LoggedRequest]
    log: EvalLog


@pytest.fixture(scope="module")
def baseline(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Baseline]:
    """`inspect eval` of the example task to the end, run "base"."""
    settings = fresh_settings(kafka_bootstrap)
    log_dir = tmp_path_factory.mktemp("baseline-logs")
    with ModelServer(latency_s=0.002) as server:
        env = inspect_env(child_env(settings), server)
        done = inspect_eval(env, "base", log_dir)
        requests = server.requests
    assert done.returncode == 0, done.stdout + done.stderr
    yield Baseline(settings, done, requests, only_log(log_dir))


def test_every_pair_is_published_once_and_every_request_carries_its_x_bench(
    baseline: Baseline,
) -> None:
    assert "resultlog/publish" in baseline.done.stdout  # Inspect's list of enabled hooks
    asked = [(r.sample_id, r.epoch) for r in baseline.requests]
    assert sorted(asked, key=str) == sorted(ALL_PAIRS, key=str)  # each pair asked once
    prompts = {str(s.id): s.input for s in baseline.log.samples or []}
    for request in baseline.requests:
        prompt = request.body["messages"][-1]["content"]
        assert prompt == prompts[str(request.sample_id)]  # x_bench names the sample it asks
        assert request.body["x_bench"] == {
            "sample_id": request.sample_id,
            "sample_epoch": request.epoch,
        }
    writes = writes_per_key(baseline.settings, "base")
    assert len(writes) == len(ALL_PAIRS) and set(writes.values()) == {1}
    records = latest(baseline.settings, "base")
    assert pairs(records) == ALL_PAIRS
    logged = {(str(s.id), s.epoch - 1): s for s in baseline.log.samples or []}
    for record in records:
        assert record.harness is not None and record.harness.name == "inspect_ai"
        assert (record.epochs, record.dataset_size) == (2, SAMPLES)
        assert record.sample_index == int(record.sample_id[1:]) - 1
        assert record.harness_payload is not None
        stored = decode(record.harness_payload).sample
        assert stored.scores == logged[(record.sample_id, record.epoch)].scores
    [config] = {record.config for record in records}  # one configuration (rule 10)
    assert config is not None and json.loads(config)["model"] == "openai-api/offline/arith"


def test_replay_and_the_aggregator_agree_with_inspects_accuracy(baseline: Baseline) -> None:
    accuracy = metrics(baseline.log)["accuracy"]
    assert accuracy == 0.875  # q6 and q7 are each wrong in one epoch of two
    key = run_key("base")
    with KafkaConnection(baseline.settings) as kafka:
        assert replay_run(kafka, key).summaries[key].accuracy == accuracy
    with running(baseline.settings) as aggregator, serving(aggregator) as base_url:

        def served_accuracy() -> float | None:
            answer = httpx.get(base_url + path(key), timeout=5)
            return answer.json()["accuracy"] if answer.status_code == 200 else None

        assert wait_for(served_accuracy, "the aggregator's summary") == accuracy


@pytest.mark.slow  # a killed inspect eval and its resume
def test_a_killed_eval_resumes_from_the_topic_without_asking_a_durable_pair_again(
    baseline: Baseline, settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    with ModelServer(latency_s=0.3) as server:
        env = inspect_env(cli_env, server)
        crashed = subprocess.Popen(
            eval_command("crash", tmp_path / "crashed-logs", "--max-samples", "2"),
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(lambda: durable_count(settings, "crash") >= 5, "5 durable pairs", TIMEOUT_S)
        finally:
            os.kill(crashed.pid, signal.SIGKILL)
            crashed.wait()
        durable = pairs(latest(settings, "crash"))
        asked_before = len(server.requests)
        assert durable < ALL_PAIRS

        elsewhere = tmp_path / "another-machine"  # only the task file and the topic
        elsewhere.mkdir()
        shutil.copy(REPO / TASK, elsewhere / "task.py")
        resumed = _resume(env, elsewhere)
        asked_again = {(r.sample_id, r.epoch) for r in server.requests[asked_before:]}

    assert resumed.returncode == 0, resumed.stderr
    [task] = json.loads(resumed.stdout)
    assert (task["reused"], task["expected"], task["status"]) == (len(durable), 16, "success")
    # The run's tokens, as replay counts them, and apart this session's (Inspect shows those).
    replayed = replay_run(KafkaConnection(settings), run_key("crash")).summaries[run_key("crash")]
    assert task["tokens"] == replayed.usage.total_tokens
    assert 0 < task["session_tokens"] < task["tokens"]
    assert not asked_again & durable
    assert asked_again | durable == ALL_PAIRS
    writes = writes_per_key(settings, "crash")
    assert len(writes) == len(ALL_PAIRS) and set(writes.values()) == {1}  # none twice
    # The resume, from another directory and task file path, is the same configuration.
    assert len({record.config_fingerprint for record in latest(settings, "crash")}) == 1
    final = read_eval_log(task["location"])
    assert len(final.samples or []) == len(ALL_PAIRS)
    assert metrics(final) == metrics(baseline.log)


def _resume(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(Path(INSPECT).with_name("resultlog")),
            "inspect",
            "resume",
            "--run-id",
            "crash",
            "--log-dir",
            "logs",
            "--task-file",
            "task.py",
            "--json",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def test_an_errored_sample_is_written_degraded_after_the_others_and_accuracy_still_agrees(
    settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    with ModelServer(latency_s=0.002) as server:
        server.override("q2", 0, Behavior(status=400))  # not retried: the sample errors
        done = inspect_eval(
            inspect_env(cli_env, server),
            "errored",
            tmp_path,
            "-T",
            "samples=3",
            "--no-fail-on-error",
        )
    assert done.returncode == 0, done.stdout + done.stderr
    raw = raw_run_records(settings, run_key("errored"))
    records = latest(settings, "errored")
    [degraded] = [r for r in records if r.degraded]
    assert (degraded.sample_id, degraded.epoch, degraded.score.value) == ("q2", 0, ScoreValue.S)
    assert degraded.error is not None and degraded.error.http_status == 400
    assert raw[-1].key == degraded.key  # written once every other pair had settled
    assert len(records) == 6 and len(raw) == 6
    accuracy = metrics(only_log(tmp_path))["accuracy"]
    with KafkaConnection(settings) as kafka:
        key = run_key("errored")
        assert replay_run(kafka, key).summaries[key].accuracy == accuracy
