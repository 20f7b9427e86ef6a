"""An aggregator under measurement: fresh topics, `resultlog aggregator` in a child process."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import httpx

from benchmarks._kafka import own_topics, settings_env
from resultlog.kafka import KafkaConnection
from resultlog.settings import Settings
from resultlog.topics import ensure_topics

__all__ = ["consumed", "fresh_settings", "serving", "spawn", "spawned_fold_path"]

_CONSUMED = "resultlog_aggregator_records_consumed_total"


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
