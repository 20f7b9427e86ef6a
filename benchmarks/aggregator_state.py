"""The aggregator's state directory: memory per record, restart with and without it.

Fills fresh topics (6 partitions, runs of 1000 samples x 2 epochs, about 1.7 kB a record) to
the first count, starts `resultlog aggregator` with a state directory and waits until it
serves every run; reads its RSS; fills to the second count while it runs and reads its RSS
again once it serves every run: the RSS growth per added record is the slope between them
(goal: under 25 B). Then, stopped cleanly:
(a) a restart with its state directory, timed from spawn to every run served (goal: 10 s);
(b) a restart on a new machine (an empty state directory), timed from spawn to the summaries
    topic's summary of every run listed (marked stale; goal: 10 s), and on to every run
    served from restored state.
Uses RESULTLOG_BOOTSTRAP_SERVERS, or starts a local broker. `figures()` returns the numbers
for another benchmark to print. Figures on a shared machine are noisy upper bounds.

    .venv/bin/python -m benchmarks.aggregator_state [--records 1000000,3000000]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from benchmarks._kafka import (
    FILL_RUN_RECORDS,
    ClientConfig,
    bootstrap_servers,
    fill_runs,
    own_topics,
)
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.kafka import KafkaConnection
from resultlog.settings import Settings
from resultlog.topics import ensure_topics

__all__ = ["StateFigures", "figures"]

PARTITIONS = 6
GOAL_BYTES_PER_RECORD = 25.0
GOAL_RESTART_S = 10.0
_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class StateFigures:
    """What one measurement found."""

    first: int  # records when the first RSS was read
    second: int  # records when the second was read
    rss_first: int  # bytes
    rss_second: int
    restart_s: float  # with the state directory, to every run served
    stale_s: float  # without it, to every run's summary listed (stale)
    restored_s: float  # without it, to every run served from restored state

    @property
    def bytes_per_record(self) -> float:
        """The RSS growth per added record between the two counts."""
        return (self.rss_second - self.rss_first) / (self.second - self.first)


def figures(bootstrap: str, first: int, second: int) -> StateFigures:
    """Measure on fresh topics of the broker at `bootstrap` (deleted after)."""
    settings = own_topics("bench-state", bootstrap_servers=bootstrap, partitions=PARTITIONS)
    ensure_topics(KafkaConnection(settings))
    config: ClientConfig = dict(settings.client_config())
    work = Path(tempfile.mkdtemp(prefix="bench-state-"))
    try:
        _fill(config, settings, first)
        child, url = _spawn(settings, work / "machine")
        try:
            _until(lambda: _listed(url, _runs(first)) == "served", "every run served")
            rss_first = _rss(child.pid)
            _fill(config, settings, second)
            _until(lambda: _listed(url, _runs(second)) == "served", "every run served")
            rss_second = _rss(child.pid)
        finally:
            _stop(child)
        restart_s, _ = _timed(settings, work / "machine", _runs(second), ("served",))
        stale_s, restored_s = _timed(
            settings, work / "new-machine", _runs(second), ("stale", "served")
        )
    finally:
        KafkaConnection(settings).admin().delete_topics(settings.every_topic())
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return StateFigures(first, second, rss_first, rss_second, restart_s, stale_s, restored_s)


def _runs(records: int) -> int:
    return -(-records // FILL_RUN_RECORDS)


def _fill(config: ClientConfig, settings: Settings, records: int) -> None:
    print(f"writing up to {records} records ...", flush=True)
    seconds = fill_runs(config, settings.results_topic, PARTITIONS, records)
    print(f"  written in {seconds:.0f}s", flush=True)


def _spawn(settings: Settings, state_dir: Path) -> tuple[subprocess.Popen[str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESULTLOG_")}
    for name, value in settings.model_dump(exclude_none=True).items():
        env[f"RESULTLOG_{name.upper()}"] = str(value)
    command = [sys.executable, "-m", "resultlog.cli", "aggregator", "--http", "127.0.0.1:0"]
    child = subprocess.Popen(
        [*command, "--state-dir", str(state_dir)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    url = line.split()[-1] if line.startswith("aggregator serving ") else ""
    if not url.startswith("http://"):
        raise SystemExit(f"the aggregator did not start (exit {child.wait(10)})")
    return child, url.rstrip("/")


def _timed(
    settings: Settings, state_dir: Path, runs: int, stages: tuple[str, ...]
) -> tuple[float, float]:
    """Spawn an aggregator; seconds from spawn until each stage (the last two)."""
    started = time.perf_counter()
    child, url = _spawn(settings, state_dir)
    times: list[float] = []
    try:
        for stage in stages:
            wanted = ("stale", "served") if stage == "stale" else ("served",)
            _until(lambda: _listed(url, runs) in wanted, f"every run {stage}")  # noqa: B023
            times.append(time.perf_counter() - started)
    finally:
        _stop(child)
    return times[0], times[-1]


def _listed(url: str, runs: int) -> str:
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


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"not {what} in {_TIMEOUT_S:g}s")
        time.sleep(0.05)


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("no VmRSS")


def _stop(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(300)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(10)


def main(argv: list[str] | None = None) -> int:
    """Measure and print the figures with their goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="1000000,3000000", help="two counts, FIRST,SECOND")
    add_results_argument(parser)
    args = parser.parse_args(argv)
    first, second = (int(n) for n in args.records.split(","))
    with bootstrap_servers() as bootstrap:
        found = figures(bootstrap, first, second)
    print(asdict(found))
    count = f"{second // 1000}k"
    slope = Result(
        f"aggregator RSS growth per record, {first // 1000}k to {count}",
        found.bytes_per_record,
        "B",
        goal=Goal("<", GOAL_BYTES_PER_RECORD),
        note=f"RSS {found.rss_first / 2**20:.0f} MB -> {found.rss_second / 2**20:.0f} MB",
    )
    report(slope, args.results)
    report(
        Result(
            f"aggregator restart with its state dir, every run served, {count}",
            found.restart_s,
            "s",
            found.restored_s,
            "new machine, restored from checkpoints",
            Goal("<", GOAL_RESTART_S),
        ),
        args.results,
    )
    report(
        Result(
            f"aggregator restart without state dir, stale summaries served, {count}",
            found.stale_s,
            "s",
            found.restored_s,
            "new machine, restored from checkpoints",
            Goal("<", GOAL_RESTART_S),
        ),
        args.results,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
