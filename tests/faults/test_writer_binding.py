"""Writers bind to the results topic they started on: the topic deleted and re-created under a
running `run` or chunk worker stops it with one line naming the topic and a non-zero exit, and
no summary the log does not hold is printed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from resultlog.producer.offline import ModelServer
from resultlog.settings import Settings
from tests.support.aggregator_process import recreate_results_topic
from tests.support.cli import child_env, cli_argv, one_line_error, run_cli
from tests.support.waiting import wait_for
from tests.support.work import MODEL, assigned_members, records_of, start_worker, work_env

pytestmark = [pytest.mark.faults, pytest.mark.timeout(300)]


def _stopped_by_the_new_topic(settings: Settings, line: str) -> None:
    """The one line names the results topic, what became of it and what to do."""
    topic = settings.results_topic
    assert line.startswith(f"resultlog: error: results topic {topic} was deleted"), line
    assert "run again" in line, line


def test_a_run_stops_when_its_topic_is_recreated(settings: Settings, tmp_path: Path) -> None:
    """`run --limit 60 --concurrency 2` at 400 ms a pair; the topic re-created mid-run: exit
    non-zero with one line naming the topic, no summary printed."""
    env = child_env(settings, RESULTLOG_API_KEY="offline")
    with ModelServer(latency_s=0.4, request_log=tmp_path / "requests.jsonl") as server:
        args = ["run", "arith", "--model", MODEL, "--run-id", "bound", "--limit", "60"]
        args += ["--concurrency", "2", "--base-url", server.base_url, "--json"]
        run = subprocess.Popen(
            cli_argv(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            wait_for(lambda: len(records_of(settings, "bound")) >= 6, "the run's first pairs")
            recreate_results_topic(settings)
            stdout, stderr = run.communicate(timeout=120)
        finally:
            run.kill()
        asked = len(server.requests)
    done = subprocess.CompletedProcess(args, run.returncode, stdout, stderr)
    _stopped_by_the_new_topic(settings, one_line_error(done))
    assert stdout == "", "a summary was printed"
    assert asked < 60, "the run went on to its end"


def test_a_chunk_worker_stops_when_its_topic_is_recreated(
    settings: Settings, tmp_path: Path
) -> None:
    """A worker running a 60-sample chunk at 400 ms a pair; the topic re-created mid-chunk:
    the worker exits non-zero, its last line naming the topic, the task left uncommitted."""
    env = work_env(child_env(settings, RESULTLOG_API_KEY="offline"), f"bind-{tmp_path.name}")
    group = env["RESULTLOG_WORK_GROUP"]
    with ModelServer(latency_s=0.4) as server:
        worker = start_worker(env, "--concurrency", "2")
        try:
            wait_for(lambda: assigned_members(settings, group) == 1, "the worker in its group")
            args = ["arith", "--model", MODEL, "--run-id", "chunked", "--limit", "60"]
            submitted = run_cli(
                env, "submit", *args, "--chunks", "1", "--base-url", server.base_url
            )
            assert submitted.returncode == 0, submitted.stderr
            wait_for(lambda: len(records_of(settings, "chunked")) >= 6, "the chunk's first pairs")
            recreate_results_topic(settings)
            _, stderr = worker.communicate(timeout=120)
        finally:
            worker.kill()
    assert worker.returncode not in (0, None), stderr
    _stopped_by_the_new_topic(settings, stderr.strip().splitlines()[-1])
    assert " done: " not in stderr and "dead-lettered" not in stderr, stderr
