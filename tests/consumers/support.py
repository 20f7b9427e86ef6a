"""Helpers of the aggregator, API and dead-letter tests: writing, waiting, reading back."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from resultlog.consumers import fold, read_run_records
from resultlog.consumers.aggregator import Aggregator, HttpServer, create_app
from resultlog.kafka import KafkaConnection
from resultlog.producer.store import KafkaResultStore
from resultlog.schemas import (
    Codec,
    RunKey,
    RunSummary,
    SampleResult,
    decode_run_key,
    encode_run_key,
)
from resultlog.settings import Settings

T = TypeVar("T")
DEADLINE_S = 30.0


def wait_for(probe: Callable[[], T | None], what: str, timeout_s: float = DEADLINE_S) -> T:
    """Poll `probe` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}: last saw {found!r}")
        time.sleep(0.05)


def write(settings: Settings, records: Iterable[SampleResult]) -> None:
    """Write records through the real result store, in order, each acknowledged."""

    async def go() -> None:
        store = KafkaResultStore(KafkaConnection(settings))
        try:
            for record in records:
                await store.write(record)
        finally:
            await store.close()

    asyncio.run(go())


def write_many(settings: Settings, records: list[SampleResult], window: int = 500) -> None:
    """Write many records concurrently (a window at a time) through the real result store."""

    async def go() -> None:
        store = KafkaResultStore(KafkaConnection(settings))
        try:
            for start in range(0, len(records), window):
                await asyncio.gather(*map(store.write, records[start : start + window]))
        finally:
            await store.close()

    asyncio.run(go())


def produce_raw(settings: Settings, messages: list[tuple[bytes | None, bytes | None, int]]) -> None:
    """Produce (key, value, partition) as given, bypassing the codec."""
    producer = Producer({**settings.client_config(), "enable.idempotence": True, "acks": "all"})
    for key, value, partition in messages:
        producer.produce(settings.results_topic, key=key, value=value, partition=partition)
    assert producer.flush(30) == 0


def expected(settings: Settings, run_key: RunKey) -> dict[str, Any]:
    """The fold over the run key's latest records in the topic, without as_of."""
    records = read_run_records(KafkaConnection(settings), run_key).records
    return bare(fold(records, run_key))


def bare(summary: RunSummary | dict[str, Any]) -> dict[str, Any]:
    """A summary as JSON without its freshness fields."""
    data = summary.model_dump(mode="json") if isinstance(summary, RunSummary) else dict(summary)
    data.pop("as_of", None)
    return data


def path(run_key: RunKey) -> str:
    """The HTTP path of a run: each segment percent-encoded as in keys."""
    return "/runs/" + encode_run_key(run_key).decode()


def served(base_url: str, run_key: RunKey) -> dict[str, Any] | None:
    """The run's summary over HTTP without as_of, or None until it is there."""
    response = httpx.get(base_url + path(run_key), timeout=5)
    return bare(response.json()) if response.status_code == 200 else None


def published(settings: Settings) -> dict[RunKey, dict[str, Any] | None]:
    """The latest value per key on the summaries topic (None: a tombstone), without as_of."""
    consumer = Consumer(
        {**settings.client_config(), "group.id": "inspect", "enable.partition.eof": True}
    )
    consumer.assign(
        [TopicPartition(settings.summaries_topic, p, 0) for p in range(settings.partitions)]
    )
    codec, latest, ended = Codec(), {}, set()
    deadline = time.monotonic() + DEADLINE_S
    while len(ended) < settings.partitions and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            assert message.error().code() == KafkaError._PARTITION_EOF
            ended.add(message.partition())
            continue
        value = message.value()
        summary = None if value is None else bare(codec.decode_run_summary(value))
        latest[decode_run_key(message.key())] = summary
    consumer.close()
    return latest


def converged(settings: Settings, want: dict[RunKey, dict[str, Any]]) -> bool:
    """Whether the summaries topic holds exactly `want` for those run keys."""
    latest = published(settings)
    return all(latest.get(run_key) == summary for run_key, summary in want.items())


@contextlib.contextmanager
def running(settings: Settings) -> Iterator[Aggregator]:
    """A running aggregator on the test's topics, publishing every 50 ms."""
    with Aggregator(KafkaConnection(settings), publish_interval_s=0.05) as aggregator:
        yield aggregator
    assert aggregator.failure is None


@contextlib.contextmanager
def serving(aggregator: Aggregator) -> Iterator[str]:
    """The aggregator's HTTP API on a free port, once every partition is caught up."""
    server = HttpServer(create_app(aggregator), "127.0.0.1", 0)
    server.start_in_thread()
    try:
        health = aggregator.health
        wait_for(lambda: health().ready, f"readiness (failure {aggregator.failure!r})")
        yield server.url
    finally:
        server.close()
