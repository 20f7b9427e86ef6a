"""An aggregator under measurement: fresh topics, `resultlog aggregator` in a child process."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

from benchmarks._kafka import own_topics, settings_env
from resultlog.kafka import KafkaConnection
from resultlog.settings import Settings
from resultlog.topics import ensure_topics

__all__ = [
    "consumed",
    "fresh_settings",
    "listed",
    "serving",
    "spawn",
    "spawned_fold_path",
    "stop",
    "until",
    "wait_idle",
]

_CONSUMED = "resultlog_aggregator_records_consumed_total"
UNTIL_S = 3600.0
_IDLE_CPU = 0.15  # the aggregator's share of a core below which it counts as idle
_IDLE_WAIT_S = 600.0


def fresh_settings(partitions: int) -> Settings:
    """Settings naming topics and a group of their own, the topics created."""
    settings = own_topics("bench", partitions=partitions)
    ensure_topics(KafkaConnection(settings))
    return settings


@contextlib.contextmanager
def serving(settings: Settings) -> Iterator[str]:
    """An aggregator on the settings' topics with a state directory of its own, ready; yields
    its base URL; topics deleted after."""
    with tempfile.TemporaryDirectory(prefix="resultlog-bench-state-") as state_dir:
        child, base_url = spawn(settings, "--state-dir", state_dir)
        try:
            _wait_ready(child, base_url)
            yield base_url
        finally:
            child.terminate()
            child.wait(30)
            KafkaConnection(settings).admin().delete_topics(settings.every_topic())


def spawn(settings: Settings, *options: str) -> tuple[subprocess.Popen[str], str]:
    """`resultlog aggregator --http 127.0.0.1:0 OPTIONS` on the settings, and its base URL
    once it announced it (not yet ready)."""
    command = [sys.executable, "-m", "resultlog.cli", "aggregator", "--http", "127.0.0.1:0"]
    child = subprocess.Popen(
        [*command, *options], env=settings_env(settings), stdout=subprocess.PIPE, text=True
    )
    return child, _announced(child)


def spawned_fold_path() -> str:
    """The fold path of an aggregator `spawn` starts, asked of a child started the same way
    (the same interpreter and environment make the same choice)."""
    probe = "import resultlog; print(resultlog.fold_path())"
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=settings_env(Settings()),
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def consumed(client: httpx.Client, base_url: str) -> int:
    """The aggregator's records-consumed counter, read from /metrics."""
    for line in client.get(base_url + "/metrics").text.splitlines():
        if line.startswith(_CONSUMED + " "):
            return int(float(line.split()[1]))
    raise RuntimeError(f"/metrics has no {_CONSUMED}")


def _announced(child: subprocess.Popen[str]) -> str:
    """The base URL the child's first line announces."""
    assert child.stdout is not None
    line = child.stdout.readline()
    base_url = line.split()[-1] if line.startswith("aggregator serving ") else ""
    if not base_url.startswith("http://"):
        raise SystemExit(f"the aggregator did not start (exit {child.wait(10)})")
    return base_url.rstrip("/")


def _wait_ready(child: subprocess.Popen[str], base_url: str) -> None:
    deadline = time.monotonic() + 60
    while httpx.get(base_url + "/healthz").status_code != 200:
        if child.poll() is not None:
            raise SystemExit(f"the aggregator exited ({child.returncode}) before it was ready")
        if time.monotonic() > deadline:
            raise SystemExit("the aggregator never became ready")
        time.sleep(0.05)


def listed(url: str, runs: int) -> str:
    """ "served" once every run is served from the aggregator's state, "stale" while the
    summaries topic's summaries of them are listed, "" otherwise."""
    try:
        listing = httpx.get(url + "/runs", params={"limit": 1}, timeout=30)
        ready = httpx.get(url + "/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return ""
    if listing.headers.get("X-Total-Count") != str(runs):
        return ""
    return "served" if ready else "stale"  # ready: every partition caught up, nothing stale


def until(condition: Callable[[], bool], what: str) -> None:
    """Wait until `condition()` holds; exit naming `what` after UNTIL_S."""
    deadline = time.monotonic() + UNTIL_S
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"not {what} in {UNTIL_S:g}s")
        time.sleep(0.05)


def wait_idle(pid: int) -> None:
    """Wait (at most _IDLE_WAIT_S) until the process used under _IDLE_CPU of a core for
    three seconds in a row."""
    deadline = time.monotonic() + _IDLE_WAIT_S
    idle = 0
    while time.monotonic() < deadline and idle < 3:
        before = cpu_s(pid)
        time.sleep(1.0)
        idle = idle + 1 if cpu_s(pid) - before < _IDLE_CPU else 0


def cpu_s(pid: int) -> float:
    """The CPU seconds process `pid` has used (user and system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop(child: subprocess.Popen[str]) -> None:
    """Stop a spawned aggregator as an operator does (SIGTERM), killing it if it hangs."""
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(300)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(10)
