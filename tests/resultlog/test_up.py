"""`resultlog up`: broker, topics, aggregator and runs page in the foreground; a signal stops it."""

from __future__ import annotations

import os
import signal
from contextlib import AbstractContextManager
from pathlib import Path

import httpx
import pytest

from resultlog.broker import LocalKafka
from resultlog.settings import Settings
from tests.support.cli import child_env, cli_argv, one_line_error, printed_json, run_cli
from tests.support.stack import Up, running_up
from tests.support.waiting import wait_for

# The slow tier: each test starts a whole stack (broker, aggregator, page) of its own.
pytestmark = pytest.mark.slow


def up(env: dict[str, str], *args: str) -> AbstractContextManager[Up]:
    return running_up(cli_argv("up", "--http", "127.0.0.1:0", *args), env)


def _without_kafka_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("RESULTLOG_")}


@pytest.mark.timeout(900)
def test_up_runs_the_stack_a_run_lands_on_the_page_and_sigterm_stops_all(
    kafka_dir: Path,
) -> None:
    env = _without_kafka_settings()
    with up(env, "--port", "0", "--dir", str(kafka_dir)) as stack:
        bootstrap, page = stack.announced()
        broker_pid = int((kafka_dir / "node-1" / "broker.pid").read_text())

        second = run_cli(env, "up", "--dir", str(kafka_dir))
        assert one_line_error(second) == (
            f"resultlog: error: resultlog up already runs for {kafka_dir.resolve()} "
            f"(pid {stack.process.pid}): RESULTLOG_BOOTSTRAP_SERVERS={bootstrap}, "
            f"runs page {page}"
        )

        run_env = {**env, "RESULTLOG_BOOTSTRAP_SERVERS": bootstrap}
        args = ("run", "arith", "--model", "m", "--run-id", "up-run", "--limit", "5", "--json")
        assert printed_json(run_cli(run_env, *args))["records"] == 5
        html = httpx.get(page, timeout=10)
        assert html.status_code == 200 and "text/html" in html.headers["content-type"]

        def served() -> bool:
            found = httpx.get(f"{page}runs/up-run/arith/m", timeout=10)
            return found.status_code == 200 and found.json()["records"] == 5

        wait_for(served, "the run's summary on the page")

        code, stderr = stack.stop(signal.SIGTERM)

    assert code == 0, stderr
    assert not LocalKafka(kafka_dir).running()
    assert (
        not Path(f"/proc/{broker_pid}").exists()
        or b"kafka.Kafka" not in Path(f"/proc/{broker_pid}/cmdline").read_bytes()
    )


def test_up_uses_a_configured_broker_and_leaves_it_running(
    settings: Settings, tmp_path: Path
) -> None:
    env = child_env(settings)
    with up(env, "--dir", str(tmp_path / "up")) as stack:
        bootstrap, page = stack.announced()
        assert bootstrap == settings.bootstrap_servers
        assert httpx.get(page, timeout=10).status_code == 200
        code, stderr = stack.stop(signal.SIGINT)

    assert code == 0, stderr
    assert not (tmp_path / "up" / "cluster.json").exists()  # no broker of its own
    assert run_cli(env, "topics", "create").returncode == 0  # the configured one still serves
