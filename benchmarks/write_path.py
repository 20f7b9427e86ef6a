"""Write path: worker pairs/s with the Kafka store next to the no-op store, same run.

The embedded offline model server (`resultlog.producer.offline`, zero latency, no errors)
answers over real HTTP; `run_benchmark` evaluates the arith benchmark's `--samples` x
`--epochs` pairs with `--concurrency` in flight, once with `NoopResultStore` and once with
`KafkaResultStore` (each record acknowledged by Kafka, acks=all), alternately for
`--rounds` rounds on fresh topics; the best time of each is kept. Goal: the Kafka store at
least 0.90x the no-op store's pairs/s (durability costs under 10%). `--profile` prints
where the event loop's time goes (cProfile) for one round of each.

    .venv/bin/python -m benchmarks.write_path [--concurrency 64] [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import pstats
import sys
import time
import uuid
from collections.abc import Coroutine
from typing import Any

from benchmarks._kafka import bootstrap_servers, connection, create_topic
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.producer import (
    Benchmark,
    KafkaResultStore,
    ModelClient,
    NoopResultStore,
    ResultStore,
    RunBudget,
    RunOptions,
    model_solver,
    run_benchmark,
)
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.offline import ModelServer

PARTITIONS = 6
MODEL = "openai-api/offline/arith"
GOAL = Goal(">=", 0.90, on="ratio")


async def timed_run(
    bench: Benchmark,
    base_url: str,
    store: ResultStore,
    epochs: int,
    concurrency: int,
    *,
    budget: RunBudget | None = None,
) -> float:
    """Seconds to evaluate every pair of a fresh run with the store (closing it included)."""
    client = ModelClient(base_url, max_retries=0)
    started = time.perf_counter()
    result = await run_benchmark(
        bench,
        MODEL,
        run_id=f"write-{uuid.uuid4().hex[:8]}",
        solver=model_solver(client, MODEL),
        store=store,
        options=RunOptions(epochs=epochs, max_concurrency=concurrency),
        budget=budget,
    )
    await store.close()
    seconds = time.perf_counter() - started
    await client.aclose()
    assert result.evaluated == len(result.records), (result.evaluated, len(result.records))
    return seconds


def kafka_store(bootstrap: str) -> KafkaResultStore:
    """A Kafka store on a fresh results topic (so every round's resume read is empty)."""
    topic = f"bench-write-{uuid.uuid4().hex[:8]}"
    create_topic({"bootstrap.servers": bootstrap}, topic, PARTITIONS)
    return KafkaResultStore(connection(bootstrap, topic, PARTITIONS))


def main() -> int:
    """Measure both stores in alternation; print the figure and, asked, the profiles."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    add_results_argument(parser)
    args = parser.parse_args()
    bench = limit_samples(arith(), args.samples)
    pairs = args.samples * args.epochs
    best = {"noop": float("inf"), "kafka": float("inf")}
    with bootstrap_servers() as bootstrap, ModelServer(latency_s=0.0, error_rate=0.0) as server:
        for _ in range(args.rounds):
            for name in ("noop", "kafka"):
                store: ResultStore = NoopResultStore() if name == "noop" else kafka_store(bootstrap)
                run = timed_run(bench, server.base_url, store, args.epochs, args.concurrency)
                best[name] = min(best[name], asyncio.run(run))
            print(
                f"  round: no-op {pairs / best['noop']:.0f} pairs/s, "
                f"kafka {pairs / best['kafka']:.0f} pairs/s (best so far)",
                flush=True,
            )
        result = Result(
            f"worker pairs/s, Kafka store, {args.concurrency} in flight",
            pairs / best["kafka"],
            "pairs/s",
            baseline=pairs / best["noop"],
            baseline_what="NoopResultStore",
            goal=GOAL,
        )
        report(result, args.results)
        if args.profile:
            for name in best:
                store = NoopResultStore() if name == "noop" else kafka_store(bootstrap)
                _profile(
                    name, timed_run(bench, server.base_url, store, args.epochs, args.concurrency)
                )
    return 0


def _profile(name: str, run: Coroutine[Any, Any, float]) -> None:
    """Run the coroutine under cProfile and print the top functions by own time."""
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(run)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(18)
    print(f"\n-- profile, {name} store (main thread: the event loop), by own time")
    print("\n".join(out.getvalue().splitlines()[4:]))


if __name__ == "__main__":
    sys.exit(main())
