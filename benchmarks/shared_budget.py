"""Shared budget: pairs/s of a budgeted run kept through the spend ledger, next to one kept
in memory (as `run --budget-usd` does), same run.

The embedded offline model server (zero latency, no errors) answers over real HTTP;
`run_benchmark` evaluates `--samples` arith pairs with `--concurrency` in flight into the
Kafka store on topics of its own, with a budget no run reaches, once with the in-memory
budget and once with the shared one (two acknowledged ledger writes and a ledger read per
pair), alternately for `--rounds` rounds; the best time of each is kept. The ratio is the
ledger's price where a pair costs nothing to answer; against a model that takes seconds
per pair it vanishes.

    .venv/bin/python -m benchmarks.shared_budget [--samples 300] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from benchmarks._kafka import bootstrap_servers, own_topics
from benchmarks._results import Result, add_results_argument, report
from benchmarks.write_path import timed_run
from resultlog.kafka import KafkaConnection
from resultlog.producer import KafkaResultStore, RunBudget
from resultlog.producer._shared_budget import shared_budget
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.offline import ModelServer
from resultlog.topics import ensure_topics

BUDGET_USD = 1000.0  # never reached: the admission's cost is measured, not a stop


def main() -> int:
    """Measure both budgets in alternation; print the figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    add_results_argument(parser)
    args = parser.parse_args()
    bench = limit_samples(arith(), args.samples)
    best = {"memory": float("inf"), "ledger": float("inf")}
    with bootstrap_servers() as bootstrap, ModelServer(latency_s=0.0, error_rate=0.0) as server:
        kafka = KafkaConnection(own_topics("bench-budget", bootstrap_servers=bootstrap))
        ensure_topics(kafka)
        for topic in kafka.settings.every_topic():  # until every partition has a leader
            kafka.partition_count(topic, created=True)
        for _ in range(args.rounds):
            for name in ("memory", "ledger"):
                shared = shared_budget(kafka) if name == "ledger" else None
                store = KafkaResultStore(kafka)
                run = timed_run(
                    bench,
                    server.base_url,
                    store,
                    1,
                    args.concurrency,
                    budget=RunBudget(BUDGET_USD, shared=shared),
                )
                best[name] = min(best[name], asyncio.run(run))
            pairs = args.samples
            print(
                f"  round: in memory {pairs / best['memory']:.0f} pairs/s, "
                f"ledger {pairs / best['ledger']:.0f} pairs/s (best so far)",
                flush=True,
            )
        report(
            Result(
                f"budgeted pairs/s, spend ledger, {args.concurrency} in flight",
                args.samples / best["ledger"],
                "pairs/s",
                baseline=args.samples / best["memory"],
                baseline_what="in-memory budget",
                note="zero-latency model: the ledger's whole price",
            ),
            args.results,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
