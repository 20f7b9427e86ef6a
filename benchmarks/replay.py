"""Replay throughput: records folded per second by `replay_all`, next to the naive reader.

The naive reader consumes the same topic with confluent-kafka and decodes every value in full
with fastavro's `schemaless_reader` (no validation, no fold). One topic is filled to the first
count, measured, topped up to the next, measured again. Realistic records (about 1.7 kB, five
messages) of runs of 1000 samples x 2 epochs. Goal: at least 2x the naive reader's records/s
at every count. Uses RESULTLOG_BOOTSTRAP_SERVERS, or starts a local broker with the launcher
in a temporary directory.

    .venv/bin/python -m benchmarks.replay [--records 100000,1000000] [--topic T] [--results F]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
import uuid

from benchmarks._kafka import (
    ClientConfig,
    bootstrap_servers,
    connection,
    create_topic,
    fill_runs,
    raw_consume_and_decode,
)
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.consumers import fold_path, replay_all
from resultlog.kafka import KafkaConnection

PARTITIONS = 6
GOAL = Goal(">=", 2.0, on="ratio")
_BEST_OF_UP_TO = 200_000  # smaller topics are read twice each, the best time kept


def main() -> int:
    """Fill, measure each count, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", default="100000,1000000", help="comma-separated counts")
    parser.add_argument("--topic", help="a topic of fill runs to top up (shared with resume)")
    parser.add_argument("--profile", action="store_true", help="then profile one replay_all")
    add_results_argument(parser)
    args = parser.parse_args()
    counts = sorted(int(n) for n in args.records.split(","))
    print(f"fold path: {fold_path()}", flush=True)
    with bootstrap_servers() as bootstrap:
        topic = args.topic or f"bench-replay-{uuid.uuid4().hex[:8]}"
        for count in counts:
            report(measure(bootstrap, topic, count), args.results)
        if args.profile:
            _profile(connection(bootstrap, topic, PARTITIONS))
    return 0


def _profile(kafka: KafkaConnection) -> None:
    """Where replay_all's time goes: the functions with the most time of their own."""
    profiler = cProfile.Profile()
    profiler.enable()
    replay_all(kafka)
    profiler.disable()
    print("replay_all under cProfile, by own time:")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(12)


def measure(bootstrap: str, topic: str, records: int) -> Result:
    """Top the topic up to `records`, then time the naive reader and `replay_all` over it."""
    config: ClientConfig = {"bootstrap.servers": bootstrap}
    create_topic(config, topic, PARTITIONS)
    print(f"topping {topic} up to {records} records ...", flush=True)
    print(f"  written in {fill_runs(config, topic, PARTITIONS, records):.0f}s", flush=True)
    kafka = connection(bootstrap, topic, PARTITIONS)
    raw_s = ours_s = float("inf")
    for _ in range(2 if records <= _BEST_OF_UP_TO else 1):
        started = time.perf_counter()
        raw_count = raw_consume_and_decode(config, topic, PARTITIONS)
        raw_s = min(raw_s, time.perf_counter() - started)
        started = time.perf_counter()
        result = replay_all(kafka)
        ours_s = min(ours_s, time.perf_counter() - started)
        assert result.records == raw_count, (result.records, raw_count)
    print(
        f"  naive reader {raw_count} in {raw_s:.1f}s; replay_all {result.records} in "
        f"{ours_s:.1f}s ({len(result.summaries)} runs, {result.undecodable} undecodable)"
    )
    return Result(
        f"replay_all, {_count(records)} records",
        result.records / ours_s,
        "rec/s",
        baseline=raw_count / raw_s,
        baseline_what="consume + full fastavro decode",
        goal=GOAL,
    )


def _count(records: int) -> str:
    return f"{records // 1_000_000}M" if records % 1_000_000 == 0 else f"{records // 1000}k"


if __name__ == "__main__":
    sys.exit(main())
