"""The TypeScript client finds the local stack as Python does, from the same two files."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from resultlog.broker._state import local_bootstrap
from tests.support.local_stack import cluster_file, stand_in_node

SAYS = "resultlog: RESULTLOG_BOOTSTRAP_SERVERS is unset: using the local broker"


def bootstrap_of(client: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """What `bootstrapServers()` of the built client answers in `env` (twice: said once)."""
    module = client / "dist" / "src" / "localStack.js"
    script = (
        f"const m = await import({str(module)!r});"
        "console.log(m.bootstrapServers()); console.log(m.bootstrapServers(process.env));"
    )
    return subprocess.run(
        ["node", "--input-type=module", "-e", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def _env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RESULTLOG_", "XDG_"))}
    return {**base, **extra}


@pytest.mark.slow  # node children
def test_typescript_reads_the_default_directory_as_python_does(
    ts_client: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    directory = home / ".local" / "state" / "resultlog" / "kafka"
    directory.mkdir(parents=True)
    with stand_in_node() as pid:
        cluster_file(directory, port=39111, pid=pid)
        assert local_bootstrap(directory) == "127.0.0.1:39111"
        found = bootstrap_of(ts_client, _env(HOME=str(home)))
        assert found.stdout.split() == ["127.0.0.1:39111"] * 2
        assert found.stderr.splitlines() == [f"{SAYS} 127.0.0.1:39111 ({directory})"]

        state = tmp_path / "state"  # XDG_STATE_HOME comes first
        moved = bootstrap_of(ts_client, _env(HOME=str(home), XDG_STATE_HOME=str(state)))
        assert moved.stdout.split() == ["127.0.0.1:9092"] * 2 and moved.stderr == ""

        configured = _env(HOME=str(home), RESULTLOG_BOOTSTRAP_SERVERS="10.0.0.1:9093")
        assert bootstrap_of(ts_client, configured).stdout.split() == ["10.0.0.1:9093"] * 2


@pytest.mark.slow  # node children
def test_write_run_help_names_its_options(ts_client: Path) -> None:
    done = subprocess.run(
        ["node", str(ts_client / "dist" / "examples" / "write-run.js"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "--run-id" in done.stdout and "--records" in done.stdout
