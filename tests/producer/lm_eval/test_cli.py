"""`resultlog lm-eval` against real lm-eval, the offline model server over HTTP and Kafka."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from resultlog.producer.offline import ModelServer
from tests.producer.lm_eval.support import (
    DOCS,
    TASK,
    lm_eval_args,
    offline_env,
    results_file,
    write_task,
)
from tests.support.cli import cli_argv

MODEL = "offline"
_KILL_AFTER = 15


@pytest.fixture
def server() -> Iterator[ModelServer]:
    """The offline model, no persistent errors (lm-eval stops a run at its first failure)."""
    with ModelServer(latency_s=0.05, error_rate=0.0) as served:
        yield served


def _lm_eval(env: dict[str, str], run_id: str, args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cli_argv("lm-eval", "--run-id", run_id, "--", *args),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _replay(env: dict[str, str], run_id: str) -> dict[str, object]:
    done = subprocess.run(
        cli_argv("replay", "--run-id", run_id, "--benchmark", TASK, "--model", MODEL, "--json"),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    summary: dict[str, object] = json.loads(done.stdout)
    return summary


# Each `lm-eval` run spends a minute or two indexing lm-eval's built-in tasks before its own:
# slow, so it runs in the fault tier beside the other long scenarios.
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_killed_run_resumes_asking_nothing_twice(
    server: ModelServer, cli_env: dict[str, str], tmp_path: Path, unique_name: str
) -> None:
    env = offline_env(cli_env, tmp_path)
    include = write_task(tmp_path / "tasks")
    args = lm_eval_args(server.base_url, include, tmp_path / "out")
    first = _lm_eval(env, unique_name, args)
    try:
        while len(server.requests) < _KILL_AFTER and first.poll() is None:
            time.sleep(0.01)
    finally:
        first.kill()  # SIGKILL
        _, first_err = first.communicate(timeout=60)
    asked_first = len(server.requests)
    assert _KILL_AFTER <= asked_first < DOCS, first_err[-2000:]

    second = _lm_eval(env, unique_name, args)
    _, err = second.communicate(timeout=600)
    assert second.returncode == 0, err[-3000:]

    asked = Counter(request.sample_id for request in server.requests)
    assert set(asked) == {str(doc) for doc in range(DOCS)}  # x_bench names every document
    asked_twice = [doc for doc, count in asked.items() if count > 1]
    assert len(asked_twice) <= 1, asked  # only the one in flight at the kill
    assert max(asked.values()) <= 2
    assert f"{asked_first - len(asked_twice)} answer(s) served from the log" in err

    written = results_file(tmp_path / "out")
    metrics = written["results"][TASK]  # type: ignore[index]
    summary = _replay(env, unique_name)
    assert summary["records"] == DOCS
    assert summary["accuracy"] == pytest.approx(metrics["exact_match,extract"])
