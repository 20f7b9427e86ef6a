"""Replay throughput: records folded per second by `replay_all`, next to a raw baseline.

The baseline consumes the same topic with confluent-kafka and decodes every value with
fastavro's `schemaless_reader` (no validation, no fold). Uses RESULTLOG_BOOTSTRAP_SERVERS, or
starts a local broker with the launcher in a temporary directory.

    .venv/bin/python -m benchmarks.replay [--records 1000000]
"""

from __future__ import annotations

import argparse
import io
import sys
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from fastavro import schemaless_reader

from benchmarks._kafka import (
    ClientConfig,
    bootstrap_servers,
    connection,
    produce,
    read_to_end,
    record,
)
from resultlog.consumers import replay_all
from resultlog.schemas import Codec, RunKey, encode_key, partition_for, shipped_catalog

PARTITIONS = 6
SAMPLES_PER_RUN = 1000
EPOCHS = 2


def fill(config: ClientConfig, topic: str, records: int) -> float:
    """Write `records` valid records (distinct runs of 1000 samples x 2 epochs); return seconds."""
    codec = Codec()
    producer = Producer({**config, "linger.ms": 20, "compression.type": "zstd"})
    started = time.perf_counter()
    written = 0
    run = 0
    while written < records:
        run_key = RunKey(f"replay-bench-{run:04d}", "arith", "openai/gpt-4o")
        partition = partition_for(run_key, PARTITIONS)
        for index in range(SAMPLES_PER_RUN):
            for epoch in range(EPOCHS):
                value = codec.encode_sample_result(
                    record(run_key, index, epoch, EPOCHS, SAMPLES_PER_RUN)
                )
                produce(producer, topic, encode_key(run_key, index, epoch), value, partition)
                written += 1
        run += 1
    producer.flush(300)
    return time.perf_counter() - started


def raw_consume_and_decode(config: ClientConfig, topic: str) -> int:
    """Consume every partition to its end and fastavro-decode each value; return the count."""
    schema = shipped_catalog().current("resultlog.SampleResult").parsed
    count = 0
    for message in read_to_end(config, topic, range(PARTITIONS)):
        value = message.value()
        assert value is not None, "the benchmark writes no tombstones"
        schemaless_reader(io.BytesIO(value[10:]), schema, schema)
        count += 1
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    with bootstrap_servers() as bootstrap:
        run(bootstrap, args.records)
    return 0


def run(bootstrap: str, records: int) -> None:
    config: ClientConfig = {"bootstrap.servers": bootstrap}
    topic = f"bench-replay-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(config)
    new = NewTopic(topic, PARTITIONS, 1, config={"cleanup.policy": "compact"})
    admin.create_topics([new])[topic].result(30)
    print(f"writing {records} records ...", flush=True)
    print(f"  written in {fill(config, topic, records):.0f}s")

    started = time.perf_counter()
    raw_count = raw_consume_and_decode(config, topic)
    raw_s = time.perf_counter() - started

    kafka = connection(bootstrap, topic, PARTITIONS)
    started = time.perf_counter()
    result = replay_all(kafka)
    ours_s = time.perf_counter() - started
    assert result.records == raw_count, (result.records, raw_count)

    raw_rate, ours_rate = raw_count / raw_s, result.records / ours_s
    print(f"{'':34}{'records':>10}{'seconds':>10}{'records/s':>12}")
    print(f"{'raw consume + fastavro decode':34}{raw_count:>10}{raw_s:>10.1f}{raw_rate:>12.0f}")
    print(
        f"{'replay_all (decode, validate, fold)':34}{result.records:>10}{ours_s:>10.1f}"
        f"{ours_rate:>12.0f}"
    )
    print(
        f"replay / raw: {ours_rate / raw_rate:.2f}x (target >= 0.5x); "
        f"{len(result.summaries)} run summaries, {result.undecodable} undecodable"
    )


if __name__ == "__main__":
    sys.exit(main())
