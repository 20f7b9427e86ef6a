"""Failover: the seconds from a `kill -9` of one of two aggregator instances until the other
serves every run, not stale, with and without standby replicas (goal: 13 s with one replica
each and 1.1M records; the session timeout, 10 s, is part of it).

Fresh topics of 6 partitions are filled with `--records` records of whole 2,000-record runs
(encoded records relabelled and produced raw). Two `resultlog aggregator` processes (static
members `a` and `b`, a state directory each, RESULTLOG_AGGREGATOR_STANDBY_REPLICAS=N) serve
them. Once both serve every run of theirs, each keeps the other's partitions warm and caught
up (N > 0) and both are idle, `--tail` more records (whole runs) are written, `a` is killed
with SIGKILL as soon as the broker acknowledged them, and `b` is polled until it serves every
run: /healthz ready (every partition caught up, nothing stale) and every run listed.

Uses RESULTLOG_BOOTSTRAP_SERVERS, or starts a local broker. Figures on a shared machine are
upper bounds.

    .venv/bin/python -m benchmarks.failover [--records 1100000] [--replicas 1,0] [--tail 2000]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks._aggregator import spawn, spawned_fold_path, stop, until, wait_idle
from benchmarks._kafka import (
    FILL_RUN_RECORDS,
    ClientConfig,
    bootstrap_servers,
    fill_runs,
    own_topics,
)
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.kafka import KafkaConnection
from resultlog.topics import ensure_topics

__all__ = ["Failover", "failover"]

PARTITIONS = 6
GOAL_S = 13.0
SESSION_TIMEOUT_S = 10.0  # the aggregator's


@dataclass(frozen=True)
class Failover:
    """One failover: seconds from the kill until `b` took the partitions, and served all."""

    replicas: int
    taken_s: float
    served_s: float
    warm_s: float  # from spawning both until each served its runs (and kept the other's warm)


def failover(bootstrap: str, records: int, replicas: int, tail: int) -> Failover:
    """Measure one failover on fresh topics of the broker at `bootstrap` (deleted after)."""
    settings = own_topics(
        "bench-failover",
        bootstrap_servers=bootstrap,
        partitions=PARTITIONS,
        aggregator_standby_replicas=replicas,
    )
    kafka = KafkaConnection(settings)
    ensure_topics(kafka)
    config: ClientConfig = dict(settings.client_config())
    work = Path(tempfile.mkdtemp(prefix="bench-failover-"))
    children: list[subprocess.Popen[str]] = []
    try:
        seconds = fill_runs(config, settings.results_topic, PARTITIONS, records)
        print(f"{records} records in the log ({seconds:.0f}s writing)", flush=True)
        started = time.perf_counter()
        (a, url_a), (b, url_b) = (
            spawn(settings, "--state-dir", str(work / name), "--instance-id", name)
            for name in ("a", "b")
        )
        children += [a, b]
        runs = -(-records // FILL_RUN_RECORDS)
        until(lambda: _split(url_a, url_b, runs, replicas), "each serving its runs, warm")
        warm_s = time.perf_counter() - started
        print(f"  both serve their runs, warm copies caught up: {warm_s:.1f}s", flush=True)
        wait_idle(a.pid)
        wait_idle(b.pid)
        fill_runs(config, settings.results_topic, PARTITIONS, records + tail)
        a.send_signal(signal.SIGKILL)
        killed = time.perf_counter()
        until(lambda: len(_health(url_b).get("partitions", ())) == PARTITIONS, "b took them")
        taken_s = time.perf_counter() - killed
        runs = -(-(records + tail) // FILL_RUN_RECORDS)
        until(lambda: _served(url_b, runs), "b serving every run")
        served_s = time.perf_counter() - killed
        print(f"  {replicas} standby: took the partitions after {taken_s:.1f}s, "
              f"served every run after {served_s:.1f}s", flush=True)  # fmt: skip
        return Failover(replicas, taken_s, served_s, warm_s)
    finally:
        for child in children:
            if child.poll() is None:
                stop(child)
        kafka.admin().delete_topics(settings.every_topic())
        subprocess.run(["rm", "-rf", str(work)], check=False)


def _health(url: str) -> dict[str, dict[str, dict[str, int]]]:
    try:
        body: dict[str, dict[str, dict[str, int]]] = httpx.get(url + "/healthz", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return body


def _listed(url: str) -> int:
    """How many runs the instance lists (0 if it does not answer)."""
    try:
        total = httpx.get(url + "/runs", params={"limit": 1}, timeout=30).headers
    except httpx.HTTPError:
        return 0
    return int(total.get("X-Total-Count", "0"))


def _served(url: str, runs: int) -> bool:
    """Whether the instance serves every run, none stale: ready and every run listed."""
    try:
        ready = httpx.get(url + "/healthz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False
    return ready and _listed(url) == runs


def _split(url_a: str, url_b: str, runs: int, replicas: int) -> bool:
    """Both ready, every run served by one of them, and (with replicas) each keeping the
    other's partitions warm, nothing behind."""
    a, b = _health(url_a), _health(url_b)
    if not (a.get("ready") and b.get("ready")) or _listed(url_a) + _listed(url_b) != runs:
        return False
    if replicas == 0:
        return True
    return all(
        set(keeper.get("standby", {})) == set(owner.get("partitions", {}))
        and all(copy["behind"] == 0 for copy in keeper.get("standby", {}).values())
        for keeper, owner in ((a, b), (b, a))
    )


def results(records: int, found: list[Failover]) -> list[Result]:
    """Each failover's figure; with one replica or more, against the goal and the one
    without a standby (if measured)."""
    without = next((f.served_s for f in found if f.replicas == 0), None)
    fold_path = spawned_fold_path()
    rows = []
    for one in found:
        rows.append(
            Result(
                f"failover after kill -9 of one of two aggregators, every run served, "
                f"{records // 1000}k records, {one.replicas} standby replica",
                one.served_s,
                "s",
                without if one.replicas else None,
                "no standby replica" if one.replicas else "",
                Goal("<=", GOAL_S) if one.replicas else None,
                note=f"partitions taken after {one.taken_s:.1f}s "
                f"(session timeout {SESSION_TIMEOUT_S:.0f}s)",
                fold_path=fold_path,
            )
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    """Measure and print the figures with their goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_100_000, help="records in the log")
    parser.add_argument("--replicas", default="1,0", help="standby replicas, one failover each")
    parser.add_argument("--tail", type=int, default=FILL_RUN_RECORDS, help="written at the kill")
    add_results_argument(parser)
    args = parser.parse_args(argv)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
    found = []
    with bootstrap_servers() as bootstrap:
        for replicas in (int(n) for n in args.replicas.split(",")):
            found.append(failover(bootstrap, args.records, replicas, args.tail))
    for row in results(args.records, found):
        report(row, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
