"""Inspect's own retries with the plugin on: `inspect eval-retry` and an `eval-set` rerun.

An eval begun without the plugin (as a team does before it adopts resultlog) is interrupted
with Ctrl-C (SIGINT), then continued by Inspect's own command with the plugin on, against the
offline model server and a real broker. The first eval's requests carry no x_bench (no
plugin): they are told apart by their prompt; the retry's carry it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from inspect_ai.log import EvalLog, read_eval_log

from resultlog.consumers import replay_run
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import ModelServer
from resultlog.settings import Settings
from tests.producer.inspect_plugin.support import (
    ALL_PAIRS,
    INSPECT,
    MODEL,
    REPO,
    TASK,
    TIMEOUT_S,
    durable_count,
    inspect_env,
    latest,
    metrics,
    pairs,
    run_key,
    unplugged,
    writes_per_key,
)
from tests.support.waiting import wait_for

MAX_SAMPLES = 2  # what can be in flight at the interrupt
_ASKED_BEFORE_INTERRUPT = 6
# A window for the interrupt: at 0.3 s an idle machine's eval finished its 16 pairs before
# Inspect acted on the Ctrl-C sent after the sixth request (the log said success).
LATENCY_S = 1.0


def _interrupted(command: list[str], env: dict[str, str], server: ModelServer) -> None:
    """Run the command without the plugin; Ctrl-C it once a few pairs were asked."""
    process = subprocess.Popen(
        command, cwd=REPO, env=unplugged(env), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while len(server.requests) < _ASKED_BEFORE_INTERRUPT and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(TIMEOUT_S)


def _clean(log: EvalLog) -> set[tuple[str, int]]:
    return {(str(s.id), s.epoch - 1) for s in log.samples or () if s.error is None}


def _eval_retry(prior: EvalLog, log_dir: Path, env: dict[str, str]) -> None:
    """Continue `prior` with Inspect's own `eval-retry` (the plugin on); it must succeed."""
    retried = subprocess.run(
        [INSPECT, "eval-retry", prior.location, "--log-dir", str(log_dir)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert retried.returncode == 0, retried.stdout + retried.stderr


def _options(log_dir: Path, run_id: str) -> list[str]:
    return [
        "--model",
        MODEL,
        "--metadata",
        f"resultlog_run={run_id}",
        "--log-dir",
        str(log_dir),
        "--display",
        "plain",
        "--max-samples",
        str(MAX_SAMPLES),
    ]


def _check(
    settings: Settings, run_id: str, server: ModelServer, before: int, prior: EvalLog
) -> EvalLog:
    """Every pair durable once; no pair asked twice beyond those in flight at the interrupt;
    replay equals the final Inspect log. Returns the final log."""
    reused = _clean(prior)
    assert 0 < len(reused) < len(ALL_PAIRS)
    in_flight = before - len(reused)  # asked before the interrupt, not logged clean
    assert 0 <= in_flight <= MAX_SAMPLES
    asked = Counter((r.sample_id, r.epoch) for r in server.requests[before:])
    assert set(asked.values()) == {1}  # the retry asked each pair at most once
    assert set(asked) == ALL_PAIRS - reused  # and none that Inspect's log had
    records = latest(settings, run_id)
    assert pairs(records) == ALL_PAIRS  # the reused pairs are on the topic too
    writes = writes_per_key(settings, run_id)
    assert len(writes) == len(ALL_PAIRS) and set(writes.values()) == {1}
    [config] = {r.config_fingerprint for r in records}  # reused and asked alike
    assert config is not None
    final = max(
        (read_eval_log(str(p)) for p in Path(prior.location).parent.glob("*.eval")),
        key=lambda log: log.eval.created,
    )
    assert final.status == "success"
    key = run_key(run_id)
    with KafkaConnection(settings) as kafka:
        summary = replay_run(kafka, key).summaries[key]
    assert summary.accuracy == metrics(final)["accuracy"]
    assert summary.records == len(final.samples or []) == len(ALL_PAIRS)
    return final


def _only(log_dir: Path) -> EvalLog:
    [path] = log_dir.glob("*.eval")
    return read_eval_log(str(path))


@pytest.mark.timeout(600)
def test_eval_retry_with_the_plugin_publishes_what_it_reuses_and_asks_nothing_twice(
    settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    log_dir = tmp_path / "logs"
    with ModelServer(latency_s=LATENCY_S) as server:
        env = inspect_env(cli_env, server)
        _interrupted([INSPECT, "eval", TASK, *_options(log_dir, "retry")], env, server)
        prior = _only(log_dir)
        assert prior.status == "cancelled"
        before = len(server.requests)
        _eval_retry(prior, log_dir, env)
        _check(settings, "retry", server, before, prior)


@pytest.mark.timeout(600)
def test_an_eval_set_rerun_with_the_plugin_publishes_what_it_reuses_and_asks_nothing_twice(
    settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    log_dir = tmp_path / "logs"
    command = [INSPECT, "eval-set", TASK, *_options(log_dir, "set")]
    with ModelServer(latency_s=LATENCY_S) as server:
        env = inspect_env(cli_env, server)
        _interrupted(command, env, server)
        prior = _only(log_dir)
        before = len(server.requests)
        rerun = subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
        assert rerun.returncode == 0, rerun.stdout + rerun.stderr
        final = _check(settings, "set", server, before, prior)
    assert json.loads(final.eval.model_dump_json())["metadata"]["resultlog_run"] == "set"
    assert os.path.samefile(Path(final.location).parent, log_dir)


@pytest.mark.timeout(600)
def test_eval_retry_reuses_from_the_topic_the_pairs_its_log_lacks(
    settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    log_dir = tmp_path / "logs"
    with ModelServer(latency_s=LATENCY_S) as server:
        env = inspect_env(cli_env, server)
        crashed = subprocess.Popen(
            [INSPECT, "eval", TASK, *_options(log_dir, "lost"), "--log-buffer", "100"],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for(lambda: durable_count(settings, "lost") >= 5, "5 durable pairs", TIMEOUT_S)
        finally:
            os.kill(crashed.pid, signal.SIGKILL)
            crashed.wait()
        durable = pairs(latest(settings, "lost"))
        prior = _only(log_dir)
        assert durable - _clean(prior)  # published, not in Inspect's log: the topic's alone
        before = len(server.requests)
        _eval_retry(prior, log_dir, env)
        asked = Counter((r.sample_id, r.epoch) for r in server.requests[before:])
    assert not set(asked) & durable  # reused from the topic, not asked again
    assert set(asked.values()) == {1}
    assert pairs(latest(settings, "lost")) == ALL_PAIRS
    writes = writes_per_key(settings, "lost")
    assert len(writes) == len(ALL_PAIRS) and set(writes.values()) == {1}
