"""`resultlog aggregator` as a real process, what it serves and logs, and the log it reads."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.aggregator import path
from tests.support.cli import child_env, cli_argv, run_cli
from tests.support.kafka import delete_topic
from tests.support.processes import start
from tests.support.records import make_record
from tests.support.summaries import bare, expected
from tests.support.waiting import wait_for


class AggregatorProcess:
    """An aggregator process, its HTTP API and (once stopped) its stderr."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.stderr = ""

    def metric(self, name: str, **labels: str) -> float:
        """One of its metrics, from /metrics (0 when it has none yet)."""
        text = httpx.get(self.url + "/metrics", timeout=5).text
        label = ",".join(f'{k}="{v}"' for k, v in labels.items())
        wanted = f"resultlog_aggregator_{name}" + (f"{{{label}}}" if label else "")
        for line in text.splitlines():
            if line.startswith(wanted + " "):
                return float(line.split()[-1])
        return 0.0

    def wait_equal(self, settings: Settings, runs: list[RunKey]) -> None:
        """Wait until it serves, not stale, what replay says of each run."""
        want = {k: expected(settings, k) for k in runs}
        assert all(w["records"] > 0 for w in want.values())
        wait_for(lambda: {k: self.served(k) for k in runs} == want, "replay's summaries")

    def warnings(self, reason: str, of: str = "") -> int:
        """How many WARNING lines ignored saved state (`of`: "saved state", ...) for `reason`."""
        return len(re.findall(rf"WARNING.*ignoring the {of}.*\({reason}\)", self.stderr))

    def served(self, run_key: RunKey) -> object:
        """The run's summary it serves, not stale, without as_of (None: none such)."""
        response = httpx.get(self.url + path(run_key), timeout=5)
        body = response.json()
        return bare(body) if response.status_code == 200 and "stale" not in body else None


@contextmanager
def aggregator_process(
    settings: Settings, stop: signal.Signals = signal.SIGTERM
) -> Iterator[AggregatorProcess]:
    """`resultlog aggregator` on the settings, stopped by `stop` on exit (a SIGTERM must leave
    no traceback)."""
    process = start(["aggregator", "--http", "127.0.0.1:0"], child_env(settings))
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("aggregator serving http://"):
        process.kill()
        pytest.fail(f"unexpected first line {line!r}: {process.communicate(timeout=10)[1][-2000:]}")
    running = AggregatorProcess(line.split()[-1].rstrip("/"))
    try:
        yield running
    finally:
        process.send_signal(stop)
        _, running.stderr = process.communicate(timeout=60)
        assert "Traceback" not in running.stderr, running.stderr[-3000:]


class Member(AggregatorProcess):
    """An aggregator process of the group, and its process."""

    def __init__(self, url: str, process: subprocess.Popen[str]) -> None:
        super().__init__(url)
        self.process = process


@contextmanager
def member(
    settings: Settings, name: str, stop: signal.Signals = signal.SIGTERM
) -> Iterator[Member]:
    """`resultlog -v aggregator` with its state under the settings' directory / `name`,
    stopped by `stop` on exit; its log (INFO, to a file: no pipe fills) read after."""
    assert settings.aggregator_state_dir is not None
    root = settings.aggregator_state_dir
    own = settings.model_copy(update={"aggregator_state_dir": root / name})
    log = root / f"{name}.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            cli_argv("-v", "aggregator", "--http", "127.0.0.1:0"),
            env=child_env(own),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("aggregator serving http://"):
        process.kill()
        pytest.fail(f"unexpected first line {line!r}: {log.read_text()[-2000:]}")
    running = Member(line.split()[-1].rstrip("/"), process)
    try:
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(stop)
        process.wait(60)
        running.stderr = log.read_text()
        assert "Traceback" not in running.stderr, running.stderr[-3000:]


def health(agg: AggregatorProcess) -> dict[str, Any]:
    body: dict[str, Any] = httpx.get(agg.url + "/healthz", timeout=5).json()
    return body


def recreate_results_topic(settings: Settings, topic: str | None = None) -> None:
    """Delete the results topic (or `topic`) and create it again with `topics create` (a new
    topic ID)."""
    name = topic or settings.results_topic
    delete_topic(settings, name)
    deadline = time.monotonic() + 60
    while True:
        done = run_cli(child_env(settings), "topics", "create")
        if done.returncode == 0:
            return
        assert time.monotonic() < deadline, done.stderr
        time.sleep(1)


def two_epoch_records(runs: list[RunKey], indexes: range) -> list[SampleResult]:
    """Two epochs of each sample index of each run, with numeric scores."""
    return [
        make_record(
            i,
            epoch,
            "CI"[(i + epoch) % 2],
            run_key=run_key,
            numeric=0.1 * (i % 7),
            dataset_size=1000,
        )
        for run_key in runs
        for i in indexes
        for epoch in range(2)
    ]
