"""`make demo`, the README's first command, on a machine whose cores are busy with other work
and that has no Java or Maven on PATH: it waits for what it polls and ends in agreement."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HIDDEN = ("java", "javac", "mvn")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


def path_without(names: tuple[str, ...], farm: Path) -> str:
    """A PATH of links to every command on this PATH but `names` (/bin may be /usr/bin)."""
    farm.mkdir()
    for entry in os.environ["PATH"].split(os.pathsep):
        folder = Path(entry)
        if not folder.is_dir():
            continue
        for command in folder.iterdir():
            link = farm / command.name
            if command.name in names or link.exists() or not os.access(command, os.X_OK):
                continue
            link.symlink_to(command)
    return str(farm)


@contextmanager
def busy_cores(count: int) -> Iterator[None]:
    """`count` processes that keep a core each busy until the block ends."""
    spinners = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def test_path_without_hides_the_named_commands(tmp_path: Path) -> None:
    path = path_without(HIDDEN, tmp_path / "bin")
    found = subprocess.run(
        ["bash", "-c", "command -v java mvn; command -v make sed"],
        env={"PATH": path},
        capture_output=True,
        text=True,
        check=False,
    )
    shown = found.stdout.split()
    assert [Path(line).name for line in shown] == ["make", "sed"], found.stdout


def test_the_demo_agrees_on_two_busy_cores_without_java_on_path(tmp_path: Path) -> None:
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("RESULTLOG_", "JAVA_HOME"))
    }
    env["PATH"] = path_without(HIDDEN, tmp_path / "bin")
    with busy_cores(2):
        done = subprocess.run(
            ["bash", "scripts/demo.sh"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=1500,
            check=False,
        )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "aggregator == replay: True" in done.stdout, output[-4000:]
    assert "Traceback" not in output, output[-4000:]
