"""Scale-out: throughput of one distributed run with 1, 2 and 4 `resultlog worker` processes.

The offline model answers after 50 ms and each worker keeps `--concurrency` (2) pairs in
flight, so the model's latency, not CPU, is the limit, and N workers should come close to N
times one worker's pairs per second. (With more pairs in flight per worker, four workers
want more CPU than a shared 2-core machine has, and the ratio measures the machine.)

For each worker count: fresh topics, N worker processes in one group (stable, every member
assigned, before the clock starts), one run submitted as `--chunks` tasks, timed until the
group has committed every task. Model-client retries are off (a 429 would sleep in backoff).
Uses RESULTLOG_BOOTSTRAP_SERVERS, or starts a local broker in a temporary directory.

    .venv/bin/python -m benchmarks.scale [--workers 1,2,4] [--samples 600] [--concurrency 2]
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass

from confluent_kafka import Consumer, ConsumerGroupState
from confluent_kafka.admin import AdminClient

from benchmarks._kafka import bootstrap_servers, own_topics, settings_env
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import ModelServer
from resultlog.producer.worker import RunSpec, plan_chunks, submit_chunks
from resultlog.settings import Settings
from resultlog.topics import ensure_topics

GOAL_AT_4 = 3.5
_JOIN_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class Measure:
    """One worker count's run: pairs and seconds from submit to the last commit."""

    workers: int
    pairs: int
    seconds: float

    @property
    def rate(self) -> float:
        """Pairs per second."""
        return self.pairs / self.seconds


def _settings(bootstrap: str, partitions: int) -> Settings:
    return own_topics(
        "scale",
        bootstrap_servers=bootstrap,
        work_partitions=partitions,
        model_max_retries=0,
    )


def _settled(settings: Settings, workers: int) -> bool:
    """True once the group is stable with `workers` members sharing every partition."""
    admin = AdminClient(settings.client_config())
    group = settings.work_group
    try:
        description = admin.describe_consumer_groups([group])[group].result(timeout=10)
    except Exception:  # the coordinator is not ready yet
        return False
    held = [len(member.assignment.topic_partitions) for member in description.members]
    stable = description.state == ConsumerGroupState.STABLE
    shared = len(held) == workers and min(held, default=0) > 0
    return stable and shared and sum(held) == settings.work_partitions


def _done(kafka: KafkaConnection, consumer: Consumer, ends: Counter[int]) -> bool:
    settings = kafka.settings
    committed = kafka.committed_offsets(
        settings.work_group, settings.work_topic, list(ends), consumer=consumer
    )
    return all(committed.get(partition, 0) >= end for partition, end in ends.items())


def measure(bootstrap: str, base_url: str, workers: int, args: argparse.Namespace) -> Measure:
    """Time one run of the benchmark with `workers` worker processes."""
    settings = _settings(bootstrap, args.partitions)
    kafka = KafkaConnection(settings)
    ensure_topics(kafka)
    command = [sys.executable, "-m", "resultlog.cli", "worker"]
    command += ["--concurrency", str(args.concurrency)]
    processes = [
        subprocess.Popen(command, env=settings_env(settings), stderr=subprocess.DEVNULL)
        for _ in range(workers)
    ]
    try:
        deadline = time.monotonic() + _JOIN_TIMEOUT_S
        while not _settled(settings, workers):
            if time.monotonic() > deadline:
                raise SystemExit("the workers did not join in time")
            time.sleep(0.2)
        spec = RunSpec(
            "arith",
            "bench/model",
            "scale",
            chunks=args.chunks,
            epochs=args.epochs,
            limit=args.samples,
            base_url=base_url,
        )
        tasks = plan_chunks(spec)
        # The topic is fresh: each partition's tasks are all it holds, from offset 0.
        ends = Counter(task.partition(args.partitions) for task in tasks)
        offsets = kafka.offsets_consumer(settings.work_group)
        started = time.perf_counter()
        submit_chunks(kafka, tasks)
        try:
            while not _done(kafka, offsets, ends):
                time.sleep(0.1)
        finally:
            offsets.close()
        seconds = time.perf_counter() - started
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(60)
    return Measure(workers, args.samples * args.epochs, seconds)


def main(argv: list[str] | None = None) -> int:
    """Measure each worker count and print pairs/s and the ratio to one worker."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--samples", type=int, default=600)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--chunks", type=int, default=12)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    add_results_argument(parser)
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.workers.split(",")]
    print(
        f"{args.samples} samples x {args.epochs} epochs in {args.chunks} chunks, "
        f"{args.partitions} work partitions, model latency {args.latency_ms:g} ms, "
        f"{args.concurrency} pairs in flight per worker"
    )
    with bootstrap_servers() as bootstrap, ModelServer(latency_s=args.latency_ms / 1000) as server:
        results = [measure(bootstrap, server.base_url, n, args) for n in counts]
    base = results[0].rate
    print(f"{'workers':>8} {'pairs':>7} {'seconds':>8} {'pairs/s':>8} {'ratio':>6}")
    for result in results:
        print(
            f"{result.workers:>8} {result.pairs:>7} {result.seconds:>8.2f} "
            f"{result.rate:>8.1f} {result.rate / base:>5.2f}x"
        )
    for result in results[1:]:
        goal = Goal(">=", GOAL_AT_4, on="ratio") if result.workers == 4 else None
        what = f"scale-out, {result.workers} workers, {args.latency_ms:g} ms model"
        report(Result(what, result.rate, "pairs/s", base, "1 worker", goal), args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
