"""Aggregator latency: from a record's delivery report to its effect being visible over HTTP.

Writes records at each fixed rate (default 1,000/s, then 10,000/s, for 15 s each) to fresh
topics, spread round-robin over `--runs` run keys (1: one run growing to 15,000 records at
1k/s, the worst case for a fold that is linear in the run's size), runs `resultlog
aggregator` in a child process (a fresh one per rate), and polls `GET /runs/{run}` (or, with
several runs, the `GET /runs` listing) as fast as it answers: a record counts as visible when
its run's `records` count includes it. The baseline is a raw confluent-kafka consumer of the
same topic in this process: delivery report to consume. Goals: p99 < 50 ms at 1k/s, < 250 ms
at 10k/s.

Usage: RESULTLOG_BOOTSTRAP_SERVERS=host:port .venv/bin/python -m benchmarks.aggregator_latency
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import threading
import time
import uuid
from dataclasses import replace

import httpx
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

from benchmarks._aggregator import fresh_settings, serving, spawned_fold_path
from benchmarks._kafka import record as make_record
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.kafka import KafkaConnection, produce
from resultlog.schemas import (
    Codec,
    RunKey,
    encode_key,
    partition_for,
)
from resultlog.settings import Settings

# p99 goals by rate (records/s); rates not listed are held to the loosest.
GOAL_P99_MS = {1000: 50.0, 10_000: 250.0}


def main() -> int:
    """Measure each rate against a fresh aggregator; print one result line per rate."""
    args = _parser().parse_args()
    folding = spawned_fold_path()
    print(f"fold path of the aggregators: {folding}", flush=True)
    for rate in (int(r) for r in args.rates.split(",")):
        settings = fresh_settings(args.partitions)
        with serving(settings) as base_url:
            result = _measure(settings, base_url, rate, args.seconds, args.runs)
        report(replace(result, fold_path=folding), args.results)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,10000", help="records per second, comma-separated")
    parser.add_argument("--seconds", type=float, default=15.0, help="how long to write per rate")
    parser.add_argument("--runs", type=int, default=1, help="run keys sharing the rate")
    parser.add_argument("--partitions", type=int, default=3)
    add_results_argument(parser)
    return parser


def _run_keys(runs: int) -> list[RunKey]:
    return [RunKey(f"bench-{i}", "arith", "openai/gpt-4o") for i in range(runs)]


def _records(count: int, run_keys: list[RunKey]) -> list[tuple[bytes, bytes, RunKey]]:
    """(key, value, run key) of `count` records, round-robin over the runs, each a new key."""
    codec, out = Codec(), []
    samples = -(-count // (2 * len(run_keys)))  # per run: 2 epochs each
    for i in range(count):
        run_key, j = run_keys[i % len(run_keys)], i // len(run_keys)
        record = make_record(run_key, j // 2, j % 2, 2, samples)
        out.append((record.key, codec.encode_sample_result(record), run_key))
    return out


class _Timeline:
    """Delivery, consume and HTTP-visibility times of record i (the i-th produced)."""

    def __init__(self, count: int) -> None:
        self.delivered: list[float | None] = [None] * count
        self.consumed: list[float | None] = [None] * count
        self.visible: list[float | None] = [None] * count
        self.polls = 0
        self.poll_seconds = 0.0


def _measure(settings: Settings, base_url: str, rate: int, seconds: float, runs: int) -> Result:
    run_keys = _run_keys(runs)
    records = _records(int(rate * seconds), run_keys)
    timeline = _Timeline(len(records))
    stop = threading.Event()
    threads = [
        threading.Thread(target=_baseline, args=(settings, records, timeline, stop)),
        threading.Thread(target=_poll_http, args=(base_url, run_keys, timeline, stop)),
    ]
    gc.freeze()  # this process's own collector pauses would show up as latency
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # the baseline consumer is assigned and fetching before the first record
    started = time.monotonic()
    _produce(settings, records, rate, timeline)
    elapsed = time.monotonic() - started
    deadline = time.monotonic() + 30
    while None in timeline.visible and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    for thread in threads:
        thread.join(10)
    return _report(timeline, elapsed, rate, runs, settings.partitions)


def _produce(
    settings: Settings, records: list[tuple[bytes, bytes, RunKey]], rate: int, timeline: _Timeline
) -> None:
    producer = KafkaConnection(settings).durable_producer()
    start = time.monotonic()
    for index, (key, value, run_key) in enumerate(records):
        due = start + index / rate
        while (now := time.monotonic()) < due:
            producer.poll(min(0.001, due - now))

        def delivered(error: KafkaError | None, _m: Message, index: int = index) -> None:
            if error is None:
                timeline.delivered[index] = time.monotonic()

        partition = partition_for(run_key, settings.partitions)
        produce(
            producer, settings.results_topic, key, value, partition=partition, on_delivery=delivered
        )
    producer.flush(30)


def _baseline(
    settings: Settings,
    records: list[tuple[bytes, bytes, RunKey]],
    timeline: _Timeline,
    stop: threading.Event,
) -> None:
    index_of = {key: i for i, (key, _, _) in enumerate(records)}
    consumer = Consumer({**settings.client_config(), "group.id": f"baseline-{uuid.uuid4().hex}"})
    partitions = range(settings.partitions)
    consumer.assign([TopicPartition(settings.results_topic, p, 0) for p in partitions])
    while not stop.is_set():
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            index = index_of.get(message.key() or b"")
            if index is not None:
                timeline.consumed[index] = time.monotonic()
    consumer.close()


def _poll_http(
    base_url: str, run_keys: list[RunKey], timeline: _Timeline, stop: threading.Event
) -> None:
    """Poll the run (one) or the listing (several); mark records up to each count visible."""
    runs = len(run_keys)
    seen = [0] * runs
    totals = [len(range(r, len(timeline.visible), runs)) for r in range(runs)]
    # Visiting several runs in turn would measure this loop's cadence: one listing covers all.
    url = base_url + (_path(run_keys[0]) if runs == 1 else f"/runs?limit={runs}")
    index = {(k.run_id, k.benchmark_id, k.model): r for r, k in enumerate(run_keys)}
    with httpx.Client(timeout=5) as client:
        while not stop.is_set() and seen != totals:
            asked = time.monotonic()
            response = client.get(url)
            now = time.monotonic()
            timeline.polls += 1
            timeline.poll_seconds += now - asked
            if response.status_code != 200:
                continue
            body = response.json()
            for summary in body if isinstance(body, list) else [body]:
                r = index[(summary["run_id"], summary["benchmark_id"], summary["model"])]
                served = min(summary["records"], totals[r])
                for j in range(seen[r], served):
                    timeline.visible[j * runs + r] = now
                seen[r] = max(seen[r], served)


def _path(run_key: RunKey) -> str:
    return "/runs/" + encode_key(run_key, 0, 0).decode().rsplit("/", 2)[0]


def _report(timeline: _Timeline, elapsed: float, rate: int, runs: int, partitions: int) -> Result:
    http = _latencies(timeline.delivered, timeline.visible)
    raw = _latencies(timeline.delivered, timeline.consumed)
    count = len(timeline.visible)
    print(
        f"aggregator latency: {count} records over {runs} run(s) at {count / elapsed:.0f}/s "
        f"for {elapsed:.1f} s, {partitions} partitions"
    )
    print(f"  {'delivery -> visible on GET /runs/...':<40}{_figures(http)}")
    print(f"  {'baseline: delivery -> raw consume':<40}{_figures(raw)}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"  machine: {os.cpu_count()} cores, load average {load} (1, 5, 15 min)")
    mean_poll = 1000 * timeline.poll_seconds / max(1, timeline.polls)
    missing = timeline.visible.count(None)
    print(f"  HTTP polls: {timeline.polls} (mean {mean_poll:.1f} ms each); not visible: {missing}")
    goal = GOAL_P99_MS.get(rate, max(GOAL_P99_MS.values()))
    return Result(
        f"aggregator p99 delivery->visible, {rate / 1000:g}k rec/s",
        _percentile(http, 99) if not missing else float("nan"),
        "ms",
        baseline=_percentile(raw, 99),
        baseline_what="raw consumer p99",
        goal=Goal("<", goal),
        note=f"{missing} records never visible" if missing else "",
    )


def _latencies(start: list[float | None], end: list[float | None]) -> list[float]:
    """Milliseconds from start to end per record; a record seen before its report counts 0."""
    return [
        max(0.0, (b - a) * 1000)
        for a, b in zip(start, end, strict=True)
        if a is not None and b is not None
    ]


def _percentile(values: list[float], pct: int) -> float:
    if len(values) < 2:  # quantiles() wants two points; one value is every percentile
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def _figures(values: list[float]) -> str:
    return (
        f"p50 {_percentile(values, 50):7.1f} ms   p99 {_percentile(values, 99):7.1f} ms   "
        f"max {max(values, default=float('nan')):7.1f} ms   (n={len(values)})"
    )


if __name__ == "__main__":
    sys.exit(main())
