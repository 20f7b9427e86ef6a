"""History cost: reading one run, and the aggregator's memory and restarts, as the log grows.

100-record runs (50 samples x 2 epochs) lie in one partition of a 6-partition results topic;
an aggregator (`resultlog aggregator` with a state directory) serves the topic and keeps its
run index. With 0, then 1M, then 3M records of other runs in the log (written fast: encoded
records relabelled and produced raw, not by the runner), it times, for a 100-record run at
each of three places of its partition (the first records of the log, half-way through the
log, and its last records), the median of a few:

- `status` (`run_status`), replay of the run (`replay_run`), a resume that asks nothing
  (`resume_state` with every record present) and the samples route's read (`read_run_records`,
  what `GET /runs/.../samples` reads): each as a ratio to the same read of the same run key
  on an empty log (a second topic set holding only the measured runs, served by its own
  aggregator), the two read in turn at the same moment so that the machine's drift over
  minutes is no part of the ratio; the worst of the three places printed (goal: within 1.2x);
- the aggregator's RSS growth per added record between the last two counts (goal: < 25 B);
- stopped cleanly, a restart with its state directory, timed from spawn to every run served
  (goal: < 10 s), and a restart on a new machine (an empty state directory) to the summaries
  topic's summaries of every run listed, marked stale (goal: < 10 s).

With `--fold-cost 250000,1000000` it measures instead what folding costs as history grows:
for each history, on fresh topics, an aggregator that served every run and went idle gets
`--new` (100k) more records; the CPU seconds it uses from then until `--settle` (75) seconds
later, every flush of its stores and every changelog write they cause included, are compared
(goal: the largest history's at most 1.25x the smallest's).

Uses RESULTLOG_BOOTSTRAP_SERVERS, or starts a local broker. Figures on a shared machine are
upper bounds.

    .venv/bin/python -m benchmarks.history [--others 0,1000000,3000000] [--results F]
    .venv/bin/python -m benchmarks.history --fold-cost 250000,1000000 [--new 100000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer

from benchmarks._aggregator import cpu_s, listed, spawn, stop, until, wait_idle
from benchmarks._kafka import (
    FILL_RUN_RECORDS,
    ClientConfig,
    bootstrap_servers,
    encoded_run,
    fill_runs,
    own_topics,
    produce,
)
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.consumers import read_run_records, replay_run, resume_state, run_status
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, partition_for
from resultlog.settings import Settings
from resultlog.topics import ensure_topics

__all__ = ["History", "measure"]

PARTITIONS = 6
MINE = RunKey("bench-history", "arith", "openai/gpt-4o")
PLACES = ("first", "middle", "last")
SAMPLES, EPOCHS = 50, 2
RATIO_GOAL = Goal("<=", 1.2, on="ratio")
GOAL_BYTES_PER_RECORD = 25.0
GOAL_RESTART_S = 10.0
GOAL_FOLD_GROWTH = Goal("<=", 1.25, on="ratio")
_REPEATS = 15
READS: dict[str, Callable[[KafkaConnection, RunKey], object]] = {
    "status": lambda kafka, run: run_status(kafka, run, EPOCHS),
    "replay of the run": replay_run,
    "resume that asks nothing": lambda kafka, run: resume_state(kafka, run, EPOCHS),
    "samples route's read": read_run_records,
}


def placed(place: str, count: int) -> RunKey:
    """The run measured at `place` once the log holds `count` other records: MINE first; the
    others named after both, in MINE's partition."""
    if place == "first":
        return MINE
    for attempt in range(10_000):
        run = RunKey(f"{MINE.run_id}-{place}-{count}-{attempt}", MINE.benchmark_id, MINE.model)
        if partition_for(run, PARTITIONS) == partition_for(MINE, PARTITIONS):
            return run
    raise SystemExit(f"no run key of MINE's partition for {place} at {count}")


@dataclass
class History:
    """What one measurement found."""

    others: list[int]
    # per read, per place, per count: (seconds on this log, on the empty log)
    times: dict[str, dict[str, list[tuple[float, float]]]] = field(default_factory=dict)
    rss: list[int] = field(default_factory=list)  # bytes, per count
    restart_s: float = 0.0  # with the state directory, to every run served
    stale_s: float = 0.0  # without it, to every run listed (stale)

    def bytes_per_record(self) -> float:
        """The RSS growth per added record between the last two counts."""
        added = self.others[-1] - self.others[-2]
        return (self.rss[-1] - self.rss[-2]) / added if added else float("nan")


def measure(bootstrap: str, others: list[int]) -> History:
    """Measure on fresh topics of the broker at `bootstrap` (deleted after)."""
    settings = own_topics("bench-history", bootstrap_servers=bootstrap, partitions=PARTITIONS)
    empty = own_topics("bench-history-empty", bootstrap_servers=bootstrap, partitions=PARTITIONS)
    kafka, empty_kafka = KafkaConnection(settings), KafkaConnection(empty)
    ensure_topics(kafka)
    ensure_topics(empty_kafka)
    config: ClientConfig = dict(settings.client_config())
    work = Path(tempfile.mkdtemp(prefix="bench-history-"))
    found = History(others, {name: {place: [] for place in PLACES} for name in READS})
    try:
        _write_mine(config, (settings, empty), MINE)
        child, url = spawn(settings, "--state-dir", str(work / "machine"))
        empty_child, empty_url = spawn(empty, "--state-dir", str(work / "empty-log"))
        try:
            for stage, count in enumerate(others):
                # Half-way through what the log will hold (or where it stands, if past it),
                # then at its end; the empty log gets the same runs and nothing else.
                _fill(config, settings, count // 2)
                _write_mine(config, (settings, empty), placed("middle", count))
                _fill(config, settings, count)
                _write_mine(config, (settings, empty), placed("last", count))
                written = time.monotonic()
                runs = _runs(count, stage)
                until(lambda: listed(url, runs) == "served", "every run served")  # noqa: B023
                mine = _runs(0, stage)  # ours alone
                until(lambda: listed(empty_url, mine) == "served", "the empty log served")  # noqa: B023
                # Its stores flushed (due aggregator_save_interval_s after the last input) and
                # run index written, so nothing of the aggregators' runs alongside our reads.
                wait = settings.aggregator_save_interval_s
                time.sleep(max(0.0, written + wait - time.monotonic()))
                wait_idle(child.pid)
                wait_idle(empty_child.pid)
                found.rss.append(_rss(child.pid))
                for name, read in READS.items():
                    for place in PLACES:
                        run = placed(place, count)
                        timed = _side_by_side(
                            lambda: read(kafka, run),  # noqa: B023
                            lambda: read(empty_kafka, run),  # noqa: B023
                        )
                        found.times[name][place].append(timed)
                _say(found, count)
        finally:
            stop(child)
            stop(empty_child)
        runs = _runs(others[-1], len(others) - 1)
        found.restart_s = _restarted(settings, work / "machine", runs, "served")
        found.stale_s = _restarted(settings, work / "new-machine", runs, "stale")
    finally:
        kafka.admin().delete_topics(settings.every_topic())
        empty_kafka.admin().delete_topics(empty.every_topic())
        subprocess.run(["rm", "-rf", str(work)], check=False)
    return found


def fold_cost(bootstrap: str, histories: list[int], new: int, settle_s: float) -> list[float]:
    """Per history: the aggregator's CPU seconds for `new` more records, over `settle_s`."""
    spent = []
    for history in histories:
        settings = own_topics("bench-fold", bootstrap_servers=bootstrap, partitions=PARTITIONS)
        kafka = KafkaConnection(settings)
        ensure_topics(kafka)
        config: ClientConfig = dict(settings.client_config())
        work = Path(tempfile.mkdtemp(prefix="bench-fold-"))
        try:
            _fill(config, settings, history)
            child, url = spawn(settings, "--state-dir", str(work / "machine"))
            try:
                runs = -(-history // FILL_RUN_RECORDS)
                until(lambda: listed(url, runs) == "served", "every run served")  # noqa: B023
                wait_idle(child.pid)
                before, started = cpu_s(child.pid), time.monotonic()
                _fill(config, settings, history + new)
                time.sleep(max(0.0, started + settle_s - time.monotonic()))
                spent.append(cpu_s(child.pid) - before)
                print(f"  {history} history: {spent[-1]:.1f} CPU s for {new} new", flush=True)
            finally:
                stop(child)
        finally:
            kafka.admin().delete_topics(settings.every_topic())
            subprocess.run(["rm", "-rf", str(work)], check=False)
    return spent


def fold_results(histories: list[int], new: int, spent: list[float]) -> Result:
    """The largest history's fold cost against the smallest's."""
    return Result(
        f"aggregator CPU for {new // 1000}k new records, {histories[-1] // 1000}k history",
        spent[-1],
        "s",
        spent[0],
        f"{histories[0] // 1000}k history",
        GOAL_FOLD_GROWTH,
        note="every flush and changelog write within the settle time included",
    )


def _say(found: History, count: int) -> None:
    print(f"  {count} others: RSS {found.rss[-1] / 2**20:.0f} MB", flush=True)
    for name, places in found.times.items():
        times = ", ".join(
            f"{place} {t[-1][0] * 1000:.0f} ms ({t[-1][1] * 1000:.0f} ms on the empty log)"
            for place, t in places.items()
        )
        print(f"    {name}: {times}", flush=True)


def _write_mine(config: ClientConfig, logs: tuple[Settings, ...], run: RunKey) -> None:
    """The run's 100 records, to the results topic of each of `logs`."""
    producer = Producer({**config, "linger.ms": 20})
    partition = partition_for(run, PARTITIONS)
    for settings in logs:
        for key, value in encoded_run(run, SAMPLES, EPOCHS):
            produce(producer, settings.results_topic, key, value, partition)
    producer.flush(60)


def _runs(others: int, stage: int) -> int:
    # The fill runs, and ours: the first, then a middle and a last one per stage so far.
    return -(-others // FILL_RUN_RECORDS) + 1 + 2 * (stage + 1)


def _fill(config: ClientConfig, settings: Settings, records: int) -> None:
    # Our 100 records count among what fill_runs finds, but never make up a whole fill run.
    seconds = fill_runs(config, settings.results_topic, PARTITIONS, records)
    print(f"{records} other records in the log ({seconds:.0f}s writing)", flush=True)


def _side_by_side(ours: Callable[[], object], base: Callable[[], object]) -> tuple[float, float]:
    """The median seconds of each of two reads, taken in turn (warmed first)."""
    ours()  # warm: metadata, connections
    base()
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(_REPEATS):
        for action, spent in ((ours, times[0]), (base, times[1])):
            start = time.perf_counter()
            action()
            spent.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def _restarted(settings: Settings, state_dir: Path, runs: int, stage: str) -> float:
    """Spawn an aggregator; seconds from spawn until every run is listed `stage` (stale:
    stale or served)."""
    started = time.perf_counter()
    child, url = spawn(settings, "--state-dir", str(state_dir))
    wanted = ("stale", "served") if stage == "stale" else ("served",)
    try:
        until(lambda: listed(url, runs) in wanted, f"every run {stage}")
        return time.perf_counter() - started
    finally:
        stop(child)


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("no VmRSS")


def results(found: History) -> list[Result]:
    """The figures with their baselines and goals."""
    top = found.others[-1]
    rows = [
        _worst(name, places, i, count)
        for name, places in found.times.items()
        for i, count in enumerate(found.others)
        if i > 0
    ]
    first, second = found.others[-2], found.others[-1]
    rows.append(
        Result(
            f"aggregator RSS growth per record, {first // 1000}k to {second // 1000}k",
            found.bytes_per_record(),
            "B",
            goal=Goal("<", GOAL_BYTES_PER_RECORD),
            note=f"RSS {found.rss[-2] / 2**20:.0f} MB -> {found.rss[-1] / 2**20:.0f} MB",
        )
    )
    label = f"{top // 1000}k records"
    rows.append(
        Result(
            f"aggregator restart with its state dir, every run served, {label}",
            found.restart_s,
            "s",
            goal=Goal("<", GOAL_RESTART_S),
        )
    )
    rows.append(
        Result(
            f"aggregator restart without state dir, stale summaries served, {label}",
            found.stale_s,
            "s",
            goal=Goal("<", GOAL_RESTART_S),
        )
    )
    return rows


def _worst(name: str, places: dict[str, list[tuple[float, float]]], i: int, count: int) -> Result:
    """The figure of the place whose read is slowest against the empty log's at `count`."""
    ratios = {p: places[p][i][0] / places[p][i][1] for p in PLACES}
    place = max(PLACES, key=ratios.__getitem__)
    ours, base = places[place][i]
    return Result(
        f"{name} of a 100-record run, {count // 1000}k other records",
        ours,
        "s",
        base,
        "the empty log, read in turn",
        RATIO_GOAL,
        note="worst of its places in the partition: "
        + ", ".join(f"{p} {ratios[p]:.2f}x" for p in PLACES),
    )


def main(argv: list[str] | None = None) -> int:
    """Measure and print the figures with their goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--others", default="0,1000000,3000000", help="counts of other records, FIRST first"
    )
    parser.add_argument("--fold-cost", default="", help="histories, e.g. 250000,1000000")
    parser.add_argument("--new", type=int, default=100_000, help="new records to fold")
    parser.add_argument("--settle", type=float, default=75.0, help="seconds CPU is counted")
    add_results_argument(parser)
    args = parser.parse_args(argv)
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}", flush=True)
    if args.fold_cost:
        histories = [int(n) for n in args.fold_cost.split(",")]
        with bootstrap_servers() as bootstrap:
            spent = fold_cost(bootstrap, histories, args.new, args.settle)
        report(fold_results(histories, args.new, spent), args.results)
        return 0
    others = [int(n) for n in args.others.split(",")]
    if len(others) < 3 or others != sorted(others):
        parser.error("--others wants at least three increasing counts")
    with bootstrap_servers() as bootstrap:
        found = measure(bootstrap, others)
    for row in results(found):
        report(row, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
