"""Commands find the local stack: with RESULTLOG_BOOTSTRAP_SERVERS unset they use the broker
`resultlog up` runs in the default directory (following HOME and XDG), and `up` and
`kafka down` keep out of each other's way."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from resultlog.broker import LocalKafka, jar_cache_dir
from resultlog.broker._state import local_bootstrap
from tests.support.cli import cli_argv, one_line_error, printed_json, run_cli
from tests.support.local_stack import cluster_file, dead_pid, held_up_lock, stand_in_node
from tests.support.stack import running_up

# The slow tier: each test starts a broker (or a whole stack) of its own.
pytestmark = pytest.mark.slow

SAYS = "resultlog: RESULTLOG_BOOTSTRAP_SERVERS is unset: using the local broker"


def fresh_home(root: Path) -> dict[str, str]:
    """An environment with an empty HOME, no XDG directory and no RESULTLOG_* setting but the
    jar cache."""
    home = root / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RESULTLOG_", "XDG_")) and k != "HOME"
    }
    cache = str(jar_cache_dir().parents[1])  # the jars as downloaded once already
    fast = {"RESULTLOG_MODEL_RETRY_BACKOFF_S": "0.01"}
    return {**env, "HOME": str(home), "RESULTLOG_KAFKA_CACHE": cache, **fast}


@pytest.mark.slow  # a whole stack of its own
@pytest.mark.timeout(900)
def test_commands_use_the_broker_up_runs_and_kafka_down_leaves_it_alone(tmp_path: Path) -> None:
    env = fresh_home(tmp_path)
    default_dir = Path(env["HOME"]) / ".local" / "state" / "resultlog" / "kafka"
    argv = cli_argv("up", "--http", "127.0.0.1:0", "--port", "0")
    with running_up(argv, env) as stack:
        bootstrap, page = stack.announced()
        assert local_bootstrap(default_dir) == bootstrap

        args = ("run", "arith", "--model", "m", "--run-id", "x", "--limit", "20", "--json")
        done = run_cli(env, *args)
        assert printed_json(done)["records"] == 20
        assert done.stderr.splitlines() == [f"{SAYS} {bootstrap} ({default_dir})"]

        refused = run_cli(env, "kafka", "down")
        line = one_line_error(refused)
        assert "resultlog up" in line and f"(pid {stack.process.pid})" in line, line
        assert "--force" in line, line
        assert LocalKafka(default_dir).running()

        # A second stack on the first one's HTTP port: refused before any broker starts.
        taken = f"127.0.0.1:{urlsplit(page).port}"
        other = tmp_path / "other"
        started = time.monotonic()
        second = run_cli(env, "up", "--http", taken, "--port", "0", "--dir", str(other))
        elapsed = time.monotonic() - started
        line = one_line_error(second)
        assert f"cannot listen on {taken}" in line and "--http 127.0.0.1:0" in line, line
        assert elapsed < 3.0, f"refused after {elapsed:.1f} s"
        assert not (other / "cluster.json").exists()  # no broker of its own was made

        code, stderr = stack.stop(signal.SIGTERM)
    assert code == 0, stderr
    assert local_bootstrap(default_dir) is None

    # None running: the old default, and the error suggesting `resultlog up`.
    status = ("status", "--run-id", "x", "--benchmark", "arith", "--model", "m")
    line = one_line_error(run_cli(env, *status))
    assert "127.0.0.1:9092" in line and "resultlog up" in line, line


@pytest.mark.slow  # a broker of its own
def test_kafka_down_force_stops_a_broker_whatever_holds_it(kafka_dir: Path) -> None:
    bootstrap = LocalKafka(kafka_dir).up(port=0)
    assert local_bootstrap(kafka_dir) == bootstrap
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESULTLOG_")}
    with held_up_lock(kafka_dir):
        refused = run_cli(env, "kafka", "down", "--dir", str(kafka_dir))
        assert "--force" in one_line_error(refused)
        forced = run_cli(env, "kafka", "down", "--dir", str(kafka_dir), "--force")
    assert forced.returncode == 0 and forced.stdout.strip() == "stopped", forced.stderr
    assert local_bootstrap(kafka_dir) is None


def test_a_cluster_file_without_a_live_node_names_no_broker(tmp_path: Path) -> None:
    cluster_file(tmp_path, port=39092, pid=dead_pid())
    assert local_bootstrap(tmp_path) is None
    assert local_bootstrap(tmp_path / "missing") is None
    (tmp_path / "cluster.json").write_text("{not json")
    assert local_bootstrap(tmp_path) is None


def test_a_cluster_with_logins_or_tls_is_not_used_without_settings(tmp_path: Path) -> None:
    with stand_in_node() as pid:
        cluster_file(tmp_path, port=39093, pid=pid)
        assert local_bootstrap(tmp_path) == "127.0.0.1:39093"
        cluster_file(tmp_path, port=39093, pid=pid, tls=True)
        assert local_bootstrap(tmp_path) is None
