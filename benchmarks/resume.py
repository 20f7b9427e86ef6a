"""Resume cost: skip-list and seeds for a 20,000-record run, alone and among 1,000,000 others.

Prints the time of `resume_state` next to a raw confluent-kafka read of the same partition
(consume to the end, no decoding), first with the run alone in the topic, then after
1,000,000 records of other runs were added. Uses RESULTLOG_BOOTSTRAP_SERVERS, or starts a
local broker with the launcher in a temporary directory.

    .venv/bin/python -m benchmarks.resume [--others 1000000] [--samples 10000] [--epochs 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from collections.abc import Callable

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks._kafka import (
    ClientConfig,
    bootstrap_servers,
    connection,
    produce,
    read_to_end,
    record,
)
from resultlog.consumers import resume_state
from resultlog.schemas import (
    Codec,
    RunKey,
    encode_key,
    partition_for,
)

PARTITIONS = 6
MODEL = "openai/gpt-4o"


def produce_run(
    producer: Producer,
    topic: str,
    codec: Codec,
    run_key: RunKey,
    *,
    samples: int,
    epochs: int,
    encode_each: bool,
) -> None:
    """Write every (sample, epoch) of one run; `encode_each=False` reuses one encoded value."""
    partition = partition_for(run_key, PARTITIONS)
    template = codec.encode_sample_result(record(run_key, 0, 0, epochs, samples))
    for index in range(samples):
        for epoch in range(epochs):
            value = (
                codec.encode_sample_result(record(run_key, index, epoch, epochs, samples))
                if encode_each
                else template
            )
            produce(producer, topic, encode_key(run_key, index, epoch), value, partition)
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


def measure(bootstrap: str, topic: str, run_key: RunKey, epochs: int) -> tuple[float, float, int]:
    config: ClientConfig = {"bootstrap.servers": bootstrap}
    kafka = connection(bootstrap, topic, PARTITIONS)
    state = resume_state(kafka, run_key, epochs)
    ours = timed(lambda: resume_state(kafka, run_key, epochs))
    partition = partition_for(run_key, PARTITIONS)
    in_partition = raw_read(config, topic, partition)
    raw = timed(lambda: raw_read(config, topic, partition))
    print(f"  skip-list {len(state.skip_list)} pairs, {in_partition} records in its partition")
    return ours, raw, in_partition


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--others", type=int, default=1_000_000)
    args = parser.parse_args()
    with bootstrap_servers() as bootstrap:
        run(bootstrap, args.samples, args.epochs, args.others)
    return 0


def run(bootstrap: str, samples: int, epochs: int, others: int) -> None:
    config: ClientConfig = {"bootstrap.servers": bootstrap}
    topic = f"bench-resume-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"cleanup.policy": "compact"})])[
        topic
    ].result(30)
    producer = Producer(
        {
            **config,
            "linger.ms": 20,
            "compression.type": "zstd",
            "queue.buffering.max.messages": 500_000,
        }
    )
    codec = Codec()
    mine = RunKey("bench-mine", "arith", MODEL)
    produce_run(producer, topic, codec, mine, samples=samples, epochs=epochs, encode_each=True)
    print(f"alone: {samples * epochs} records of one run")
    alone = measure(bootstrap, topic, mine, epochs)

    per_run = samples * epochs
    started = time.perf_counter()
    for n in range(max(1, others // per_run)):
        other = RunKey(f"bench-other-{n:03d}", "arith", MODEL)
        produce_run(
            producer, topic, codec, other, samples=samples, epochs=epochs, encode_each=False
        )
    print(
        f"wrote {others} records of other runs in {time.perf_counter() - started:.0f}s "
        "(one encoded value per run, distinct keys)"
    )
    print("among others:")
    crowded = measure(bootstrap, topic, mine, epochs)

    print()
    print(f"{'':24}{'resume_state':>14}{'raw read':>12}{'ours/raw':>10}")
    for label, (ours, raw, _) in (("alone", alone), ("with other runs", crowded)):
        print(f"{label:24}{ours:>13.3f}s{raw:>11.3f}s{ours / raw:>9.2f}x")
    print(f"resume with others / alone: {crowded[0] / alone[0]:.2f}x (target <= 1.5x)")
    print(f"raw read with others / alone: {crowded[1] / alone[1]:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
