"""`purge` beside a live writer: refused while it holds its lease, or it takes the lease over.

And on a terminal it says what it deletes and asks; scripts confirm with --yes; --dry-run counts.
"""

from __future__ import annotations

import os
import pty
import signal
import subprocess
from pathlib import Path

import pytest

from resultlog.kafka import KafkaConnection
from resultlog.producer import live_leases
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.cli import child_env, cli_argv, run_cli
from tests.support.processes import durable, model_server, one_line_error, start
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

MODEL = "offline/gpt-4o"
LIMIT = 300


def _key_args(run_key: RunKey) -> list[str]:
    return ["--run-id", run_key.run_id, "--benchmark", run_key.benchmark_id, "--model", MODEL]


def _writer(env: dict[str, str], url: str, run_key: RunKey) -> subprocess.Popen[str]:
    args = ["run", "arith", *_key_args(run_key)[:2], "--model", MODEL, "--json"]
    worker = start([*args, "--limit", str(LIMIT), "--concurrency", "2", "--base-url", url], env)
    return worker


def _running(settings: Settings, run_key: RunKey, worker: subprocess.Popen[str]) -> None:
    wait_for(lambda: len(durable(settings, run_key)) >= 10, "10 durable pairs", 90)
    assert worker.poll() is None, "the run ended too soon"


def test_purge_refuses_a_run_being_written_and_names_its_writer(
    tmp_path: Path, settings: Settings
) -> None:
    env = child_env(settings)
    run_key = RunKey("live", "arith", MODEL)
    with model_server(tmp_path, env, "--latency-ms", "60", "--error-rate", "0") as (url, _):
        worker = _writer(env, url, run_key)
        try:
            _running(settings, run_key, worker)
            refused = run_cli(env, "purge", "--yes", *_key_args(run_key))
            line = one_line_error(refused, "is being written")
            assert f"pid {worker.pid}" in line and "--force" in line
        finally:
            _out, err = worker.communicate(timeout=180)
    assert worker.returncode == 0, err
    assert len(durable(settings, run_key)) == LIMIT, "the refused purge deleted something"


def test_purge_force_fences_the_writer_before_deleting(tmp_path: Path, settings: Settings) -> None:
    env = child_env(settings, RESULTLOG_LEASE_TTL_S="3")
    run_key = RunKey("fenced", "arith", MODEL)
    with model_server(tmp_path, env, "--latency-ms", "60", "--error-rate", "0") as (url, _log):
        worker = _writer(env, url, run_key)
        try:
            _running(settings, run_key, worker)
            purged = run_cli(env, "purge", "--yes", "--force", *_key_args(run_key))
            assert purged.returncode == 0, purged.stderr
            assert "record(s) deleted" in purged.stdout
        finally:
            _, err = worker.communicate(timeout=60)
    one_line_error((worker.returncode, err), "lease was taken over by purge --force")
    assert durable(settings, run_key) == [], "the writer wrote after the purge"
    assert live_leases(KafkaConnection(settings), run_key) == []
    again = run_cli(env, "run", "arith", *_key_args(run_key)[:2], "--model", MODEL, "--limit", "5")
    assert again.returncode == 0, again.stderr


def test_purge_asks_on_a_terminal_and_refuses_a_script_without_yes(settings: Settings) -> None:
    env = child_env(settings)
    run_key = RunKey("asked", "arith", MODEL)
    ran = run_cli(env, "run", "arith", *_key_args(run_key)[:2], "--model", MODEL, "--limit", "4")
    assert ran.returncode == 0, ran.stderr

    counted = run_cli(env, "purge", "--dry-run", *_key_args(run_key))
    assert counted.returncode == 0 and counted.stdout.startswith("would delete 4 record(s)")
    script = run_cli(env, "purge", *_key_args(run_key))
    one_line_error(script, "pass --yes to confirm")
    assert len(durable(settings, run_key)) == 4

    assert "nothing deleted" in _on_a_terminal(env, run_key, "n\n")
    assert len(durable(settings, run_key)) == 4
    shown = _on_a_terminal(env, run_key, "y\n")
    assert "This deletes 4 record(s) of asked" in shown and "summary" in shown
    assert "purged asked" in shown
    assert durable(settings, run_key) == []


def _on_a_terminal(env: dict[str, str], run_key: RunKey, answer: str) -> str:
    """Run `purge` with a pseudo-terminal as stdin and stderr, answer its question; its output."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        cli_argv("purge", *_key_args(run_key)),
        env=env,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    shown = b""
    try:
        while b"[y/N]" not in shown:
            shown += os.read(controller, 4096)
        os.write(controller, answer.encode())
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the terminal closed: the process ended
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if process.wait(60) is None:
            process.send_signal(signal.SIGKILL)
        os.close(controller)
    return shown.decode(errors="replace")
