"""Aggregator sustained ingest: records folded per second while a producer writes flat out.

Fresh topics and a caught-up `resultlog aggregator` in a child process; then this process
writes `--records` realistic records (encoded beforehand, runs of 1000 samples x 2 epochs) as
fast as one producer can, while reading the aggregator's records-consumed counter from
/metrics. The rate is the records it folded over the time it took from the first folded
record to the last. The baseline is the naive reader (consume + full fastavro decode) over
the same topic afterwards. Goal: at least 60k records/s.

    .venv/bin/python -m benchmarks.ingest [--records 200000] [--results F]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import httpx
from confluent_kafka import Producer

from benchmarks._aggregator import consumed, fresh_settings, serving, spawned_fold_path
from benchmarks._kafka import (
    FILL_RUN_RECORDS,
    ClientConfig,
    encoded_run,
    produce,
    raw_consume_and_decode,
    relabelled,
)
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.schemas import RunKey, partition_for
from resultlog.settings import Settings

PARTITIONS = 6
GOAL = Goal(">=", 60_000)
_SAMPLE_S = 0.1
_TIMEOUT_S = 600.0


def main() -> int:
    """Measure, print the figure."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    add_results_argument(parser)
    args = parser.parse_args()
    folding = spawned_fold_path()
    print(f"fold path of the aggregator: {folding}", flush=True)
    settings = fresh_settings(PARTITIONS)
    messages = _messages(args.records)
    config: ClientConfig = dict(settings.client_config())
    with serving(settings) as base_url:
        folded, seconds, produce_s = _ingest(settings, base_url, messages)
        started = time.perf_counter()  # the aggregator is caught up and idle by now
        raw_count = raw_consume_and_decode(config, settings.results_topic, PARTITIONS)
        raw_s = time.perf_counter() - started
    print(
        f"  producer wrote {len(messages)} in {produce_s:.1f}s ({len(messages) / produce_s:.0f}/s);"
        f" the aggregator folded {folded} in {seconds:.1f}s; naive reader {raw_count} in "
        f"{raw_s:.1f}s"
    )
    producer_bound = seconds <= produce_s * 1.05
    result = Result(
        f"aggregator sustained ingest, {len(messages) // 1000}k live records",
        folded / seconds,
        "rec/s",
        baseline=raw_count / raw_s,
        baseline_what="consume + full fastavro decode",
        goal=GOAL,
        note="bounded by the producer's rate" if producer_bound else "",
        fold_path=folding,
    )
    report(result, args.results)
    return 0


def _messages(records: int) -> list[tuple[bytes, bytes, int]]:
    """(key, value, partition) of whole runs, the first built and encoded, the rest relabelled."""
    template_key = RunKey("ingest-000000", "arith", "openai/gpt-4o")
    template = encoded_run(template_key, FILL_RUN_RECORDS // 2, 2)
    out: list[tuple[bytes, bytes, int]] = []
    for run in range(-(-records // FILL_RUN_RECORDS)):
        run_key = RunKey(f"ingest-{run:06d}", "arith", "openai/gpt-4o")
        partition = partition_for(run_key, PARTITIONS)
        out.extend((k, v, partition) for k, v in relabelled(template, template_key, run_key))
    return out


def _write(settings: Settings, messages: list[tuple[bytes, bytes, int]]) -> float:
    """Write every message as fast as one producer can (acks=all); return the seconds."""
    producer = Producer(
        {**settings.client_config(), "linger.ms": 5, "compression.type": "zstd", "acks": "all"}
    )
    started = time.perf_counter()
    for key, value, partition in messages:
        produce(producer, settings.results_topic, key, value, partition)
    producer.flush(300)
    return time.perf_counter() - started


def _ingest(
    settings: Settings, base_url: str, messages: list[tuple[bytes, bytes, int]]
) -> tuple[int, float, float]:
    """(records folded, seconds from the first to the last, seconds the producer took)."""
    produce_s: list[float] = []
    writer = threading.Thread(target=lambda: produce_s.append(_write(settings, messages)))
    total = len(messages)
    first: tuple[float, int] | None = None
    with httpx.Client(timeout=10) as client:
        base = consumed(client, base_url)
        writer.start()
        deadline = time.monotonic() + _TIMEOUT_S
        while (now_count := consumed(client, base_url) - base) < total:
            now = time.monotonic()
            if first is None and now_count > 0:
                first = (now, now_count)
            if now > deadline:
                break
            time.sleep(_SAMPLE_S)
        end = time.monotonic()
    writer.join()
    start, at_start = first if first is not None else (end, 0)
    return now_count - at_start, max(end - start, 1e-9), produce_s[0]


if __name__ == "__main__":
    sys.exit(main())
