"""Helpers of the fault tier: raw partition scans, audits, runs, CLI and aggregator access."""

from __future__ import annotations

import contextlib
import random
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from resultlog.consumers import read_run_records
from resultlog.consumers.aggregator import Aggregator, HttpServer, create_app
from resultlog.kafka import KafkaConnection
from resultlog.producer import (
    KafkaResultStore,
    ModelClient,
    Progress,
    RunResult,
    StaticBenchmark,
    arith,
    model_solver,
    run_benchmark,
)
from resultlog.producer.runner import WritePolicy
from resultlog.schemas import RunKey, partition_for, run_key_prefix
from resultlog.settings import Settings
from tests.factories import cli_env_for as env_for

T = TypeVar("T")
DEADLINE_S = 60.0
MODEL = "offline/gpt-4o"


def wait_for(probe: Callable[[], T | None], what: str, timeout_s: float = DEADLINE_S) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(0.05)


def small_bench(samples: int, name: str = "arith") -> StaticBenchmark:
    """The first `samples` arith questions as their own benchmark."""
    full = arith()
    return StaticBenchmark(name, full.items[:samples], full.scorer, full.system_prompt)


async def run_once(
    settings: Settings,
    bench: StaticBenchmark,
    run_id: str,
    base_url: str,
    *,
    epochs: int = 2,
    delivery_timeout_ms: int = 1500,
    concurrency: int = 2,
    on_progress: Callable[[Progress], None] | None = None,
    timeout_s: float = 10.0,
    max_retries: int = 0,
) -> RunResult:
    """One run (or resume) of `bench` through the real Kafka store, with fast retries."""
    timeout = {"delivery_timeout_ms": delivery_timeout_ms}
    store = KafkaResultStore(KafkaConnection(settings.model_copy(update=timeout)))
    try:
        async with ModelClient(
            base_url, max_retries=max_retries, backoff_initial=0.01, timeout=timeout_s
        ) as client:
            return await run_benchmark(
                bench,
                MODEL,
                run_id=run_id,
                solver=model_solver(client, MODEL),
                epochs=epochs,
                store=store,
                max_concurrency=concurrency,
                on_progress=on_progress,
                write_policy=WritePolicy(initial_delay_s=0.05, rng=random.Random(3)),
            )
    finally:
        await store.close()


# -- reading the topic raw -------------------------------------------------------------------


@dataclass(frozen=True)
class RawRecord:
    """One message as stored: offset, key and value bytes (None: a tombstone)."""

    offset: int
    key: bytes | None
    value: bytes | None


def scan(config: dict[str, Any], topic: str, partition: int) -> list[RawRecord]:
    """Every message of one partition, from its beginning to the current high watermark."""
    consumer = Consumer(
        {**config, "group.id": "fault-scan", "enable.partition.eof": True, "log_level": 0}
    )
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=30, cached=False
        )
        if high <= low:
            return []
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        found: list[RawRecord] = []
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                return found
            found.append(RawRecord(message.offset() or 0, message.key(), message.value()))
            if (message.offset() or 0) >= high - 1:
                return found
        raise AssertionError(f"could not read {topic}[{partition}] to {high}")
    finally:
        consumer.close()


def run_partition(settings: Settings, run_key: RunKey) -> int:
    """The results-topic partition of a run key."""
    return partition_for(run_key, settings.partitions)


def raw_run_records(settings: Settings, run_key: RunKey) -> list[RawRecord]:
    """Every raw message of the run key in its partition (tombstones included)."""
    prefix = run_key_prefix(run_key)
    records = scan(
        settings.client_config(), settings.results_topic, run_partition(settings, run_key)
    )
    return [r for r in records if r.key is not None and r.key.startswith(prefix)]


@dataclass(frozen=True)
class Audit:
    """Latest-record and raw-record counts of a run against the pairs it must hold."""

    lost: int  # expected pairs without a latest record
    extra: int  # latest records of pairs not expected
    duplicates: int  # raw records byte-identical to an earlier one of the same key
    raw: int  # raw records of the run
    latest: int  # latest records of the run

    @property
    def clean(self) -> bool:
        """No record lost, none unexpected, none written twice."""
        return self.lost == self.extra == self.duplicates == 0


def audit(settings: Settings, run_key: RunKey, pairs: set[tuple[int, int]]) -> Audit:
    """Compare the run's latest records (exactly one per pair) and raw records with `pairs`."""
    records, undecodable, _ = read_run_records(KafkaConnection(settings), run_key)
    assert undecodable == 0
    latest = Counter((r.sample_index, r.epoch) for r in records)
    assert all(n == 1 for n in latest.values())
    raw = raw_run_records(settings, run_key)
    copies = Counter((r.key, r.value) for r in raw)
    return Audit(
        lost=len(pairs - set(latest)),
        extra=len(set(latest) - pairs),
        duplicates=sum(n - 1 for n in copies.values()),
        raw=len(raw),
        latest=len(records),
    )


def all_pairs(samples: int, epochs: int) -> set[tuple[int, int]]:
    """Every (sample_index, epoch) of a run."""
    return {(i, e) for i in range(samples) for e in range(epochs)}


# -- summaries ---------------------------------------------------------------------------------


@contextlib.contextmanager
def serving_aggregator(settings: Settings) -> Iterator[tuple[Aggregator, str]]:
    """A running aggregator (a group of its own) and its HTTP API, once caught up."""
    group = f"{settings.aggregator_group}.{uuid.uuid4().hex[:8]}"
    kafka = KafkaConnection(settings)
    with Aggregator(kafka, group_id=group, publish_interval_s=0.05) as aggregator:
        server = HttpServer(create_app(aggregator), "127.0.0.1", 0)
        server.start_in_thread()
        try:
            wait_for(lambda: aggregator.health().ready, "the aggregator to be ready")
            yield aggregator, server.url
        finally:
            server.close()
    assert aggregator.failure is None, aggregator.failure


# -- the command line ------------------------------------------------------------------------


def resultlog(*args: str) -> list[str]:
    """The argv of a `resultlog` child process."""
    return [sys.executable, "-m", "resultlog.cli", *args]


def cli(
    settings: Settings, *args: str, timeout_s: float = 120.0, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run `resultlog ARGS` against the settings' broker and topics."""
    return subprocess.run(
        resultlog(*args),
        env=env_for(settings, **env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def produce_raw(
    settings: Settings, messages: list[tuple[bytes | None, bytes | None]], partition: int
) -> list[str]:
    """Produce (key, value) pairs verbatim into one partition; return the delivery errors."""
    producer = Producer({**settings.client_config(), "enable.idempotence": True, "acks": "all"})
    errors: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            errors.append(error.str())

    for key, value in messages:
        producer.produce(
            settings.results_topic, key=key, value=value, partition=partition, on_delivery=delivered
        )
    assert producer.flush(30) == 0
    return errors


def topic_is_empty(settings: Settings, topic: str | None = None) -> bool:
    """True when no partition of the topic holds any message."""
    name = topic or settings.results_topic
    consumer = Consumer({**settings.client_config(), "group.id": "fault-empty", "log_level": 0})
    try:
        return all(
            consumer.get_watermark_offsets(TopicPartition(name, p), timeout=30, cached=False)[1]
            == 0
            for p in range(settings.partitions)
        )
    finally:
        consumer.close()


def report(table: str, **figures: object) -> None:
    """Print one row of the fault table (visible with -s or in the captured output)."""
    cells = " ".join(f"{name}={value}" for name, value in figures.items())
    print(f"FAULT-TABLE {table}: {cells}")
