"""`resultlog inspect resume` continues the whole eval it is asked to, or refuses before any
model call: every task (those with no durable record too), under one configuration."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from resultlog.consumers import ConsumerError, read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.producer.inspect_plugin.support import (
    INSPECT,
    MODEL,
    REPO,
    TIMEOUT_S,
    eval_command,
    inspect_env,
    inspect_eval,
    latest,
)
from tests.support.waiting import wait_for

MIX = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import match
from inspect_ai.solver import generate


def _sums(prefix: str, count: int) -> Task:
    return Task(
        dataset=[
            Sample(id=f"{prefix}{i}", input=f"What is {i} + 2?", target=str(i + 2))
            for i in range(count)
        ],
        solver=generate(),
        scorer=match(numeric=True),
    )


@task
def red() -> Task:
    return _sums("t", 8)  # no id the offline model answers with a lasting 429 or 500


@task
def plain() -> Task:
    return _sums("p", 4)
"""


def _killed(command: list[str], cwd: Path, env: dict[str, str], enough: Callable[[], bool]) -> None:
    """Run `command` until `enough()` holds, then SIGKILL it."""
    process = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(enough, "durable pairs before the kill", TIMEOUT_S)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()


def _resume(
    env: dict[str, str], cwd: Path, logs: Path, run_id: str, *options: str
) -> subprocess.CompletedProcess[str]:
    resultlog = str(Path(INSPECT).with_name("resultlog"))
    return subprocess.run(
        [resultlog, "inspect", "resume", "--run-id", run_id, "--log-dir", str(logs), *options],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def test_resume_runs_the_tasks_that_had_made_no_record(
    settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "mix.py").write_text(MIX)
    command = [INSPECT, "eval", "mix.py@red", "mix.py@plain", "--model", MODEL]
    command += ["--metadata", "resultlog_run=mix", "--log-dir", "logs", "--display", "plain"]
    with ModelServer(latency_s=0.3) as server:
        env = inspect_env(cli_env, server)
        _killed([*command, "--max-samples", "1"], tmp_path, env, _red_count(settings, 3))
        before = Counter((r.sample_id, r.epoch) for r in server.requests)
        resumed = _resume(env, tmp_path, tmp_path / "logs", "mix", "--json")
        asked = Counter((r.sample_id, r.epoch) for r in server.requests)
    assert resumed.returncode == 0, resumed.stderr
    tasks = {task["benchmark_id"]: task for task in json.loads(resumed.stdout)}
    assert set(tasks) == {"red", "plain"}
    assert {task["status"] for task in tasks.values()} == {"success"}
    assert tasks["plain"]["expected"] == 4 and tasks["red"]["expected"] == 8
    assert set(asked) == {(f"t{i}", 0) for i in range(8)} | {(f"p{i}", 0) for i in range(4)}
    assert not any(str(id_).startswith("p") for id_, _ in before), "plain ran before the kill"
    twice = {pair for pair, count in asked.items() if count > 1}
    assert len(twice) <= 1  # at most the pair in flight at the kill


def _red_count(settings: Settings, least: int) -> Callable[[], bool]:
    """True once task red has `least` durable records."""

    def enough() -> bool:
        try:
            found = read_run_records(KafkaConnection(settings), RunKey("mix", "red", MODEL))
        except ConsumerError:
            return False
        return len(found.records) >= least

    return enough


def test_resume_refuses_records_of_another_configuration(
    settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    with ModelServer(latency_s=0.3) as server:
        env = inspect_env(cli_env, server)
        cold = inspect_eval(env, "mixed", tmp_path / "cold", "--temperature", "0.0")
        assert cold.returncode == 0, cold.stdout + cold.stderr
        hot = eval_command("mixed", tmp_path / "hot", "--temperature", "0.9", "--max-samples", "1")
        _killed(hot, REPO, env, lambda: _hot_records(settings) >= 4)
        asked = len(server.requests)
        refused = _resume(env, REPO, tmp_path / "resumed", "mixed")
        assert len(server.requests) == asked  # refused before any model call
        accepted = _resume(
            env, REPO, tmp_path / "resumed", "mixed", "--accept-config-change", "--json"
        )
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode == 1 and len(lines) == 1, refused.stderr
    assert lines[0].startswith("resultlog: error:")
    assert "made under another configuration" in lines[0]
    assert "generation.temperature: 0.0 there, 0.9 here" in lines[0]
    assert "--accept-config-change" in lines[0]
    assert accepted.returncode == 0, accepted.stderr


def _hot_records(settings: Settings) -> int:
    """How many of the run's latest records the 0.9 eval made."""
    try:
        records = latest(settings, "mixed")
    except ConsumerError:
        return 0
    return sum('"temperature":0.9' in (r.config or "") for r in records)
