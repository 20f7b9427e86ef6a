"""`resultlog up`: a broker never outlives its stack, and two stacks never share state."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import httpx
import pytest

from resultlog.broker import LocalKafka
from tests.support.cli import cli_argv, printed_json, run_cli
from tests.support.stack import running_up
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(1500)]


def _env(tmp_path: Path) -> dict[str, str]:
    """No Kafka settings, and a home of the test's own (the default state lives there)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESULTLOG_")}
    env.pop("XDG_STATE_HOME", None)
    return {**env, "HOME": str(tmp_path / "home")}


def _broker_pid(directory: Path) -> int:
    return int((directory / "node-1" / "broker.pid").read_text())


def _gone(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return b"kafka.Kafka" not in cmdline


def _fold_a_run(bootstrap: str, page: str, env: dict[str, str], run_id: str) -> None:
    run_env = {**env, "RESULTLOG_BOOTSTRAP_SERVERS": bootstrap}
    args = ("run", "arith", "--model", "m", "--run-id", run_id, "--limit", "4", "--json")
    assert printed_json(run_cli(run_env, *args))["records"] == 4

    def served() -> bool:
        found = httpx.get(f"{page}runs/{run_id}/arith/m", timeout=10)
        return found.status_code == 200 and found.json()["records"] == 4

    wait_for(served, f"{run_id}'s summary on the page")


def test_a_killed_up_takes_its_broker_and_an_orphan_is_adopted(tmp_path: Path) -> None:
    """SIGKILL of `up` ends its broker; an orphan broker of an earlier `up` is adopted and
    stopped with the stack (SIGHUP); a port in use leaves no lock file and names --port 0."""
    env, directory = _env(tmp_path), tmp_path / "stack"
    argv = cli_argv("up", "--http", "127.0.0.1:0", "--dir", str(directory), "--port", "0")
    with running_up(argv, env) as stack:
        stack.announced()
        broker = _broker_pid(directory)
        stack.process.kill()
        stack.process.communicate(timeout=60)
    wait_for(lambda: _gone(broker), "the broker of a killed up to end")

    orphan = LocalKafka(directory)
    orphan.up()  # as if an up died without taking it along
    (directory / "up.json").write_text(json.dumps({"pid": 2**22 + 1, "started_broker": True}))
    broker = _broker_pid(directory)
    with running_up(argv, env) as stack:
        stack.announced()
        code, stderr = stack.stop(signal.SIGHUP)
    assert "adopting the broker an earlier up" in stderr, stderr
    assert code != 0 and "Traceback" not in stderr, stderr
    assert _gone(broker) and not orphan.running()
    assert not (directory / "up.json").exists()

    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = str(busy.getsockname()[1])
        taken = run_cli(env, "up", "--dir", str(tmp_path / "other"), "--port", port)
    assert taken.returncode != 0
    assert "--port 0 picks a free one" in taken.stderr.strip().splitlines()[-1], taken.stderr
    assert not (tmp_path / "other" / "up.json").exists()


def test_two_stacks_one_after_the_other_share_no_state(tmp_path: Path) -> None:
    """Two `up` stacks in two --dirs, one after the other: no foreign-state warning."""
    env = _env(tmp_path)
    for name in ("first", "second"):
        directory = tmp_path / name
        argv = cli_argv("up", "--http", "127.0.0.1:0", "--dir", str(directory), "--port", "0")
        with running_up(argv, env) as stack:
            bootstrap, page = stack.announced()
            _fold_a_run(bootstrap, page, env, f"{name}-run")
            code, stderr = stack.stop(signal.SIGTERM)
        assert code == 0, stderr
        assert "ignoring the saved state" not in stderr, stderr
        assert any((directory / "aggregator-state").iterdir())  # the stack's own state
    assert not (tmp_path / "home" / ".local" / "state" / "resultlog").exists()
