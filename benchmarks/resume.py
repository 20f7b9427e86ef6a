"""Resume cost: skip-list and seeds for a 20,000-record run, alone and among 1,000,000 others.

Prints the time of `resume_state` next to a raw confluent-kafka read of the same partition
(consume to the end, no decoding), first with the run alone in a topic of its own, then in a
topic holding 1,000,000 records of other runs (`--others-topic`: the one `benchmarks.replay`
filled, topped up here when short). Goal: at most 1.5x the raw read's time, both ways. Uses
RESULTLOG_BOOTSTRAP_SERVERS, or starts a local broker with the launcher in a temporary
directory.

    .venv/bin/python -m benchmarks.resume [--others 1000000] [--others-topic T] [--results F]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable

from confluent_kafka import Producer

from benchmarks._kafka import (
    ClientConfig,
    bootstrap_servers,
    connection,
    create_topic,
    encoded_run,
    fill_runs,
    produce,
    read_to_end,
)
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.consumers import resume_state
from resultlog.schemas import RunKey, partition_for

PARTITIONS = 6
GOAL = Goal("<=", 1.5, on="ratio")
MINE = RunKey("bench-mine", "arith", "openai/gpt-4o")


def write_run(config: ClientConfig, topic: str, run_key: RunKey, samples: int, epochs: int) -> None:
    """Write every (sample, epoch) of one run, each record built and encoded."""
    producer = Producer({**config, "linger.ms": 20, "compression.type": "zstd"})
    partition = partition_for(run_key, PARTITIONS)
    for key, value in encoded_run(run_key, samples, epochs):
        produce(producer, topic, key, value, partition)
    producer.flush(120)


def raw_read(config: ClientConfig, topic: str, partition: int) -> int:
    """Consume one partition to its end without decoding; return the message count."""
    return sum(1 for _ in read_to_end(config, topic, [partition]))


def timed(action: Callable[[], object], repeats: int = 3) -> float:
    """Median wall time of `repeats` runs of the action."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(bootstrap: str, topic: str, epochs: int, label: str) -> Result:
    """Time resume_state of MINE and a raw read of its partition, alternately."""
    config: ClientConfig = {"bootstrap.servers": bootstrap}
    kafka = connection(bootstrap, topic, PARTITIONS)
    partition = partition_for(MINE, PARTITIONS)
    state = resume_state(kafka, MINE, epochs)  # warm: metadata, connections
    in_partition = raw_read(config, topic, partition)
    ours = timed(lambda: resume_state(kafka, MINE, epochs))
    raw = timed(lambda: raw_read(config, topic, partition))
    print(f"  skip-list {len(state.skip_list)} pairs, {in_partition} records in its partition")
    return Result(
        f"resume_state of a {len(state.skip_list) // 1000}k-record run, {label}",
        ours,
        "s",
        baseline=raw,
        baseline_what="raw read of its partition",
        goal=GOAL,
    )


def main() -> int:
    """Measure alone, then among others; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--others", type=int, default=1_000_000)
    parser.add_argument("--others-topic", help="a topic of fill runs (benchmarks.replay's)")
    add_results_argument(parser)
    args = parser.parse_args()
    with bootstrap_servers() as bootstrap:
        config: ClientConfig = {"bootstrap.servers": bootstrap}
        alone = f"bench-resume-{uuid.uuid4().hex[:8]}"
        create_topic(config, alone, PARTITIONS)
        write_run(config, alone, MINE, args.samples, args.epochs)
        print(f"alone: {args.samples * args.epochs} records of one run", flush=True)
        report(measure(bootstrap, alone, args.epochs, "alone"), args.results)

        crowded = args.others_topic or f"bench-resume-{uuid.uuid4().hex[:8]}"
        create_topic(config, crowded, PARTITIONS)
        seconds = fill_runs(config, crowded, PARTITIONS, args.others)
        print(f"{crowded}: {args.others} records of other runs ({seconds:.0f}s writing)")
        write_run(config, crowded, MINE, args.samples, args.epochs)
        label = f"among {args.others // 1000}k others"
        report(measure(bootstrap, crowded, args.epochs, label), args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
