"""One-run commands as a user types them, on an empty log and on one with 1M other records.

`resultlog run` of a finished run (a resume that asks nothing), `resultlog status` and
`resultlog replay` of a 100-record run (50 samples x 2 epochs, written by `resultlog run`
against an offline model server that never fails), each timed as a whole child process, the
median of five after one unmeasured run. The run sits at each of three places of its partition
(the first records of the log, half-way through it, its last records); an aggregator with a
state directory keeps the run index, as a deployment's does. Each command's figure is its
worst place's ratio to the same command at the same place on the empty log (goal: 1.2x).

The in-process reads behind them are `benchmarks/history.py`'s. Uses
RESULTLOG_BOOTSTRAP_SERVERS, or starts a local broker; figures on a shared machine are upper
bounds.

    .venv/bin/python -m benchmarks.one_run_commands [--others 1000000] [--results F]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from tempfile import TemporaryDirectory

from benchmarks._aggregator import listed, spawn, stop, until, wait_idle
from benchmarks._kafka import bootstrap_servers, fill_runs, own_topics, settings_env
from benchmarks._results import Goal, Result, add_results_argument, report
from benchmarks.cli_startup import Timed, median_of, timed_once
from benchmarks.history import PARTITIONS, PLACES, _runs, placed
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from resultlog.topics import ensure_topics

__all__ = ["measure"]

SAMPLES, EPOCHS = 50, 2
RATIO_GOAL = Goal("<=", 1.2, on="ratio")
_SCRIPT = Path(sys.executable).with_name("resultlog")
_CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "resultlog.cli"]
Times = dict[str, dict[str, Timed]]  # per command, per place


def run_at(place: str) -> RunKey:
    """The run measured at `place` (history's, so all three share one partition), the same
    name in both logs."""
    return placed(place, 0)


def commands(run: RunKey, base_url: str) -> dict[str, list[str]]:
    """The three commands of one run, as a user types them."""
    key = ["--run-id", run.run_id, "--benchmark", run.benchmark_id, "--model", run.model]
    shape = ["--limit", str(SAMPLES), "--epochs", str(EPOCHS)]
    run_argv = [*_CLI, "run", run.benchmark_id, "--model", run.model, "--run-id", run.run_id]
    return {
        "resume that asks nothing": [*run_argv, *shape, "--base-url", base_url, "--json"],
        "status": [*_CLI, "status", *key, "--json"],
        "replay": [*_CLI, "replay", *key, "--json"],
    }


@contextmanager
def prepared_log(bootstrap: str, others: int, base_url: str) -> Iterator[dict[str, str]]:
    """Fresh topics holding the three runs around `others` other records, served by an
    aggregator that has indexed them and gone idle: the environment naming them."""
    settings = own_topics("bench-commands", bootstrap_servers=bootstrap, partitions=PARTITIONS)
    kafka = KafkaConnection(settings)
    ensure_topics(kafka)
    env = {**settings_env(settings), "RESULTLOG_API_KEY": "offline"}
    config = dict(settings.client_config())
    try:
        with _aggregator(settings) as (url, pid):
            for place, fill_to in (("first", 0), ("middle", others // 2), ("last", others)):
                if fill_to:
                    fill_runs(config, settings.results_topic, PARTITIONS, fill_to)
                resume = commands(run_at(place), base_url)["resume that asks nothing"]
                subprocess.run(resume, env=env, check=True, stdout=subprocess.DEVNULL)
            until(lambda: listed(url, _runs(others, 0)) == "served", "every run served")
            wait_idle(pid)  # its run index written, and nothing of it beside our commands
            print(f"{others} other records written and indexed", flush=True)
            yield env
    finally:
        kafka.admin().delete_topics(settings.every_topic())


@contextmanager
def _aggregator(settings: Settings) -> Iterator[tuple[str, int]]:
    """An aggregator with a state directory of its own: its URL and process id."""
    with TemporaryDirectory(prefix="bench-commands-") as state:
        child, url = spawn(settings, "--state-dir", state)
        try:
            yield url, child.pid
        finally:
            stop(child)


def measure(bootstrap: str, others: int, repeats: int, base_url: str) -> tuple[Times, Times]:
    """Each command at each place on the empty log and on the full one, timed side by side
    (one after the other, `repeats` times), so that a change of load meets both alike."""
    with (
        prepared_log(bootstrap, 0, base_url) as empty_env,
        prepared_log(bootstrap, others, base_url) as full_env,
    ):
        empty: Times = {}
        full: Times = {}
        for name in commands(run_at("first"), base_url):
            empty[name], full[name] = {}, {}
            for place in PLACES:
                argv = commands(run_at(place), base_url)[name]
                pair = timed_pair(argv, empty_env, full_env, repeats)
                empty[name][place], full[name][place] = pair
    return empty, full


def timed_pair(
    argv: list[str], first: dict[str, str], second: dict[str, str], repeats: int
) -> tuple[Timed, Timed]:
    """The command's medians under two environments, run alternately (one unmeasured run
    of each first)."""
    timed_once(argv, first), timed_once(argv, second)
    runs = [(timed_once(argv, first), timed_once(argv, second)) for _ in range(repeats)]
    return median_of([a for a, _ in runs]), median_of([b for _, b in runs])


def results(empty: Times, full: Times, others: int) -> list[Result]:
    """Per command, the worst place's figure next to the same place on the empty log."""
    rows = []
    for name, places in full.items():
        place = max(PLACES, key=lambda p: places[p].wall / empty[name][p].wall)
        ratios = ", ".join(f"{p} {places[p].wall / empty[name][p].wall:.2f}x" for p in PLACES)
        cpu = ", ".join(f"{p} {places[p].cpu / empty[name][p].cpu:.2f}x" for p in PLACES)
        rows.append(
            Result(
                f"`resultlog {name}` of a 100-record run, {others // 1000}k other records",
                places[place].wall,
                "s",
                empty[name][place].wall,
                "the same on an empty log",
                RATIO_GOAL,
                note=f"wall by place: {ratios}; CPU by place: {cpu}",
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    """Measure and print the figures with their goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--others", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    add_results_argument(parser)
    args = parser.parse_args(argv)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
    with bootstrap_servers() as bootstrap, ModelServer(error_rate=0.0) as model:
        empty, full = measure(bootstrap, args.others, args.repeats, model.base_url)
    for row in results(empty, full, args.others):
        report(row, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
