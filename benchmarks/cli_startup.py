"""Command-line start: `resultlog --version` and `resultlog status` of a 100-record run.

Each is timed as a whole child process, the median of five, next to a bare `python -c pass`
of the same interpreter: `--version` loads no Kafka client or record model, `status` what a
one-run read needs (goals: under 0.3 s and 0.6 s on an idle machine; figures on a shared
machine are upper bounds). The run lies alone in topics of its own. Uses
RESULTLOG_BOOTSTRAP_SERVERS, or starts a local broker.

    .venv/bin/python -m benchmarks.cli_startup [--repeats 5] [--results F]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from confluent_kafka import Producer

from benchmarks._kafka import bootstrap_servers, encoded_run, own_topics, produce, settings_env
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, partition_for
from resultlog.settings import Settings
from resultlog.topics import ensure_topics

__all__ = ["Timed", "median_of", "timed_command", "timed_once"]

MINE = RunKey("bench-startup", "arith", "openai/gpt-4o")
SAMPLES, EPOCHS = 50, 2
VERSION_GOAL = Goal("<", 0.3)
STATUS_GOAL = Goal("<", 0.6)
# The console script, as a user types it.
_SCRIPT = Path(sys.executable).with_name("resultlog")
_CLI = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "resultlog.cli"]


class Timed(NamedTuple):
    """Medians of a command's runs: wall time, and the CPU time (user and system) it used."""

    wall: float
    cpu: float


def timed_command(argv: list[str], env: dict[str, str], repeats: int) -> Timed:
    """The medians of `repeats` runs of the command (one unmeasured run first).

    On a busy machine the wall time mostly measures the wait for a core; the CPU time is what
    the command itself costs, about its wall time on an idle machine.
    """
    timed_once(argv, env)
    runs = [timed_once(argv, env) for _ in range(repeats)]
    return median_of(runs)


def timed_once(argv: list[str], env: dict[str, str]) -> Timed:
    """One run of the command: its wall time and the CPU time it used."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Timed(wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)


def median_of(runs: list[Timed]) -> Timed:
    """The median wall time and the median CPU time of some runs."""
    return Timed(statistics.median(t.wall for t in runs), statistics.median(t.cpu for t in runs))


def _write_run(settings: Settings) -> None:
    producer = Producer(dict(settings.client_config()))
    partition = partition_for(MINE, settings.partitions)
    for key, value in encoded_run(MINE, SAMPLES, EPOCHS):
        produce(producer, settings.results_topic, key, value, partition)
    producer.flush(60)


def measure(bootstrap: str, repeats: int) -> list[Result]:
    """The three timings, on topics of their own (deleted after)."""
    settings = own_topics("bench-startup", bootstrap_servers=bootstrap)
    kafka = KafkaConnection(settings)
    ensure_topics(kafka)
    try:
        _write_run(settings)
        env = settings_env(settings)
        bare = timed_command([sys.executable, "-c", "pass"], env, repeats)
        version = timed_command([*_CLI, "--version"], env, repeats)
        key = ["--run-id", MINE.run_id, "--benchmark", MINE.benchmark_id, "--model", MINE.model]
        status = timed_command([*_CLI, "status", *key, "--json"], env, repeats)
    finally:
        kafka.admin().delete_topics(settings.every_topic())
    return [
        _result("resultlog --version", version, bare, VERSION_GOAL),
        _result(
            f"resultlog status of a {SAMPLES * EPOCHS}-record run, empty log",
            status,
            bare,
            STATUS_GOAL,
        ),
    ]


def _result(what: str, timed: Timed, bare: Timed, goal: Goal) -> Result:
    note = f"CPU {timed.cpu:.3f} s (python -c pass: {bare.cpu:.3f} s)"
    return Result(what, timed.wall, "s", bare.wall, "python -c pass", goal, note=note)


def main(argv: list[str] | None = None) -> int:
    """Measure and print the figures with their goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    add_results_argument(parser)
    args = parser.parse_args(argv)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
    with bootstrap_servers() as bootstrap:
        for row in measure(bootstrap, args.repeats):
            report(row, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
