"""Aggregator rebuild: start to every run served, from the whole log and from the changelog.

For each record count: fill a fresh results topic with realistic records (about 1.7 kB, runs
of 1000 samples x 2 epochs), time the naive raw reader on it (consume + full fastavro decode),
then `resultlog aggregator` child processes, each with an empty state directory of its own
and timed from spawn to /healthz ready and `GET /runs` listing every run:
(a) a fresh changelog topic: the whole log is read (each flush of the stores writes the
    changelog as it goes), then it stops cleanly;
(b) `--tail` more records written, then a new aggregator (a new machine: no state directory)
    that restores its stores from the changelog and reads the tail only.
Goals: (a) at least 1.5x the naive reader's speed (at most 1/1.5 of its time) at every
count, (b) at most 0.15x the naive reader's time (every run served, not stale), and (b) at
1M under 3x (b) at 100k. Uses RESULTLOG_BOOTSTRAP_SERVERS, or starts
a local broker in a temporary directory. Figures on a shared machine are noisy upper bounds.

    .venv/bin/python -m benchmarks.rebuild [--records 100000,1000000] [--tail 1000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import httpx
from confluent_kafka import Producer

from benchmarks._aggregator import spawn, spawned_fold_path, stop
from benchmarks._kafka import (
    FILL_EPOCHS,
    FILL_RUN_RECORDS,
    ClientConfig,
    bootstrap_servers,
    fill_runs,
    own_topics,
    produce,
    raw_consume_and_decode,
    record,
)
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.kafka import KafkaConnection
from resultlog.schemas import Codec, RunKey, encode_key, partition_for
from resultlog.settings import Settings
from resultlog.topics import ensure_topics

# At least 1.5x the naive reader's speed: at most 1/1.5 of its time.
GOAL_VS_RAW = Goal("<=", 1 / 1.5, on="ratio")
GOAL_RESTORE_VS_RAW = Goal("<=", 0.15, on="ratio")  # a new machine, from the changelog
GOAL_GROWTH = 3.0  # the 1M rebuild under 3x the 100k one
PARTITIONS = 6
EPOCHS = FILL_EPOCHS
_READY_TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Figures:
    """One record count's timings, in seconds."""

    records: int
    raw_s: float
    full_s: float
    restored_s: float


def main(argv: list[str] | None = None) -> int:
    """Measure each record count and print the figures, the baseline and the goal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="100000,1000000", help="comma-separated counts")
    parser.add_argument(
        "--tail", type=int, default=1000, help="records after the first aggregator stopped"
    )
    add_results_argument(parser)
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.records.split(",")]
    folding = spawned_fold_path()
    print(f"fold path of the aggregators: {folding}", flush=True)
    with bootstrap_servers() as bootstrap:
        results = [measure(bootstrap, count, args.tail) for count in counts]
    _report(results, args.tail)
    _to_table(results, args.results, folding)
    return 0


def measure(bootstrap: str, records: int, tail: int) -> Figures:
    """Fill fresh topics with `records`, then time the raw reader, (a) and (b)."""
    settings = _settings(bootstrap)
    ensure_topics(KafkaConnection(settings))
    config: ClientConfig = dict(settings.client_config())
    print(f"writing {records} records ...", flush=True)
    seconds = fill_runs(config, settings.results_topic, PARTITIONS, records)
    print(f"  written in {seconds:.0f}s", flush=True)
    started = time.perf_counter()
    raw_consume_and_decode(config, settings.results_topic, PARTITIONS)
    raw_s = time.perf_counter() - started
    runs = -(-records // FILL_RUN_RECORDS)
    with tempfile.TemporaryDirectory(prefix="resultlog-bench-") as scratch:
        full_s, restored_s = _rebuilds(settings, Path(scratch), runs, tail)
    KafkaConnection(settings).admin().delete_topics(settings.every_topic())
    return Figures(records, raw_s, full_s, restored_s)


def _rebuilds(settings: Settings, scratch: Path, runs: int, tail: int) -> tuple[float, float]:
    """(a) and (b), each on a state directory of its own under `scratch`: their times."""
    full_s, child, _ = _until_served(settings, runs, scratch / "a")
    stop(child)  # a clean stop flushes every store (and so the changelog)
    _write_tail(dict(settings.client_config()), settings.results_topic, tail)
    restored_s, child, _ = _until_served(settings, runs + 1, scratch / "b")
    stop(child)
    return full_s, restored_s


def _settings(bootstrap: str) -> Settings:
    return own_topics("bench-rebuild", bootstrap_servers=bootstrap, partitions=PARTITIONS)


def _until_served(
    settings: Settings, runs: int, state_dir: Path
) -> tuple[float, subprocess.Popen[str], str]:
    """Spawn an aggregator on `state_dir`; seconds until it is ready and lists `runs` runs."""
    started = time.perf_counter()
    child, url = spawn(settings, "--state-dir", str(state_dir))
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while not _serves(url, runs):
        if time.monotonic() > deadline or child.poll() is not None:
            raise SystemExit("the aggregator never served every run")
        time.sleep(0.05)
    return time.perf_counter() - started, child, url


def _serves(url: str, runs: int) -> bool:
    try:
        if httpx.get(url + "/healthz", timeout=5).status_code != 200:
            return False
        listing = httpx.get(url + "/runs", params={"limit": 1}, timeout=30)
    except httpx.HTTPError:
        return False
    total: str | None = listing.headers.get("X-Total-Count")
    return total == str(runs)


def _write_tail(config: ClientConfig, topic: str, tail: int) -> None:
    """`tail` records of one new run, written after the first aggregator stopped."""
    codec = Codec()
    producer = Producer({**config, "linger.ms": 20, "compression.type": "zstd"})
    run_key = RunKey(f"rebuild-tail-{uuid.uuid4().hex[:6]}", "arith", "openai/gpt-4o")
    partition = partition_for(run_key, PARTITIONS)
    for i in range(tail):
        index, epoch = divmod(i, EPOCHS)
        value = codec.encode_sample_result(record(run_key, index, epoch, EPOCHS, tail // EPOCHS))
        produce(producer, topic, encode_key(run_key, index, epoch), value, partition)
    producer.flush(60)


def _report(results: list[Figures], tail: int) -> None:
    print(f"{'records':>9} {'raw read':>9} {'(a) full':>9} {'(b) new':>9} {'(b)/raw':>8}")
    for f in results:
        print(
            f"{f.records:>9} {f.raw_s:>8.1f}s {f.full_s:>8.1f}s {f.restored_s:>8.1f}s "
            f"{f.restored_s / f.raw_s:>7.3f}x"
        )
    print(
        f"(a): a fresh changelog, the whole log read; (b): a new machine restores from the "
        f"changelog, reads a tail of {tail}; raw: consume + full fastavro decode; goal (b)/raw "
        f"<= {GOAL_RESTORE_VS_RAW.bound:g}"
    )
    by_count = {f.records: f for f in results}
    small, large = by_count.get(100_000), by_count.get(1_000_000)
    if small is not None and large is not None:
        growth = large.restored_s / small.restored_s
        verdict = "met" if growth < GOAL_GROWTH else "NOT met"
        print(
            f"goal: the 1M rebuild under {GOAL_GROWTH:g}x the 100k one: {verdict} "
            f"({growth:.2f}x from the changelog; {large.full_s / small.full_s:.2f}x without)"
        )


def _to_table(results: list[Figures], table: Path | None, folding: str) -> None:
    """The rebuilds as lines of bench.sh's final table: times against the raw read; `folding`:
    the aggregators' fold path."""
    raw = "raw read (consume + fastavro)"
    rows = []
    for figures in results:
        count = f"{figures.records // 1000}k"
        what = f"aggregator rebuild, whole log, {count}"
        rows.append(Result(what, figures.full_s, "s", figures.raw_s, raw, GOAL_VS_RAW))
        what = f"new machine, changelog + tail, every run served, {count}"
        rows.append(Result(what, figures.restored_s, "s", figures.raw_s, raw, GOAL_RESTORE_VS_RAW))
    by_count = {f.records: f for f in results}
    small, large = by_count.get(100_000), by_count.get(1_000_000)
    if small is not None and large is not None:
        what = "restore from the changelog, 1M vs 100k"
        goal = Goal("<", GOAL_GROWTH, on="ratio")
        rows.append(Result(what, large.restored_s, "s", small.restored_s, "100k", goal))
    for row in rows:
        report(replace(row, fold_path=folding), table)


if __name__ == "__main__":
    sys.exit(main())
