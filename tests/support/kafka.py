"""Kafka as the tests see it: fresh topics, records written, raw bytes in, raw messages out.

The raw reader is the tests' own (the client config comes from `KafkaConnection`, the loop does
not), so what a test reads back does not depend on the readers under test.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from resultlog.consumers._scan import watermark_offsets
from resultlog.kafka import KafkaConnection, produce
from resultlog.producer import KafkaResultStore
from resultlog.schemas import RunKey, SampleResult, partition_for, run_key_prefix
from resultlog.settings import Settings
from resultlog.topics import ensure_topics, topic_specs
from tests.support.waiting import DEADLINE_S, wait_for

TEST_PARTITIONS = 3
# Each test's aggregators keep their state stores here (removed with the test's topics).
STATE_ROOT = Path(tempfile.gettempdir()) / "resultlog-test-state"
# A message produced raw: key, value (None: a tombstone) and the partition it goes to.
RawMessage = tuple[bytes | None, bytes | None, int]


def topic_settings(
    bootstrap: str,
    name: str | None = None,
    *,
    extra_config: Mapping[str, str] | None = None,
    **fields: Any,
) -> Settings:
    """Settings whose topics and group are named after `name` (default: a fresh one), created."""
    name = name or f"t{uuid.uuid4().hex[:12]}"
    defaults = {"partitions": TEST_PARTITIONS, "aggregator_state_dir": STATE_ROOT / name}
    settings = Settings(bootstrap_servers=bootstrap, **{**defaults, **fields}).namespaced(name)
    with KafkaConnection(settings) as kafka:
        # CI runs two tiers on two cores: the broker may learn of a new topic tens of seconds
        # after creating it (30 s was seen to run out).
        ensure_topics(kafka, topic_specs(settings, extra_config), timeout_s=2 * DEADLINE_S)
    return settings


def drop_topics(settings: Settings) -> None:
    """Delete a test's topics: one session broker serves every test, and thousands of idle
    topics cost its small heap (and every metadata request) more than the deletes do.

    The broker's answer is awaited, not the deletion itself: an admin client dropped before it
    sent the request (a new client connects first) deletes nothing, which left every test's
    topics on the session broker (7,940 partitions after about 600 tests)."""
    with KafkaConnection(settings) as kafka:
        admin = kafka.admin()  # held until the answers come: the futures do not keep it
        futures = admin.delete_topics([spec.name for spec in topic_specs(settings)])
        for future in futures.values():
            try:
                future.result(timeout=DEADLINE_S)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:  # deleted by the test
                    raise
    if settings.aggregator_state_dir is not None:
        shutil.rmtree(settings.aggregator_state_dir, ignore_errors=True)


def delete_topic(settings: Settings, name: str) -> None:
    """Delete one topic and wait until the broker's metadata no longer lists it.

    The deletion's answer comes when the controller has it; the broker that serves reads may
    list the topic, and serve it, a little longer (seen under load in CI)."""
    with KafkaConnection(settings) as kafka:
        admin = kafka.admin()  # held until the answer comes: the future does not keep it
        admin.delete_topics([name])[name].result(DEADLINE_S)
        wait_for(
            lambda: name not in admin.list_topics(timeout=10).topics,
            f"{name} gone from the metadata",
        )


def run_partition(settings: Settings, run_key: RunKey) -> int:
    """The partition of the run key's records and summary."""
    return partition_for(run_key, settings.partitions)


# -- writing ---------------------------------------------------------------------------------


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


def produce_raw(
    settings: Settings, messages: Iterable[RawMessage], topic: str | None = None
) -> list[str]:
    """Produce messages verbatim (default: to the results topic); return the delivery errors."""
    errors: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            errors.append(error.str())

    with KafkaConnection(settings) as kafka:
        producer = kafka.durable_producer()
        for key, value, partition in messages:
            target = topic or kafka.results_topic
            produce(producer, target, key, value, partition=partition, on_delivery=delivered)
        assert producer.flush(DEADLINE_S) == 0
    return errors


# -- reading ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RawRecord:
    """One message as stored: where it is, key and value bytes (None: a tombstone), headers."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: dict[str, str] = field(default_factory=dict)


def read_partition(settings: Settings, topic: str, partition: int) -> list[RawRecord]:
    """Every message of one partition, from its beginning to its high watermark when called."""
    with KafkaConnection(settings) as kafka:
        consumer = kafka.reader()
        try:
            return _read_to_end(consumer, topic, partition)
        finally:
            consumer.close()


def read_topic(settings: Settings, topic: str) -> list[RawRecord]:
    """Every message of every partition of the topic, partition by partition."""
    with KafkaConnection(settings) as kafka:
        consumer = kafka.reader()
        try:
            partitions = range(kafka.partition_count(topic, consumer))
            return [r for p in partitions for r in _read_to_end(consumer, topic, p)]
        finally:
            consumer.close()


def message_count(settings: Settings, topic: str | None = None) -> int:
    """How many messages the topic (default: the results topic) holds, by its watermarks."""
    return sum(high - low for low, high in watermarks(settings, topic))


def watermarks(settings: Settings, topic: str | None = None) -> list[tuple[int, int]]:
    """Each partition's (low, high) watermarks of the topic (default: the results topic)."""
    with KafkaConnection(settings) as kafka:
        name = topic or kafka.results_topic
        consumer = kafka.reader()
        try:
            return [
                watermark_offsets(consumer, TopicPartition(name, partition), DEADLINE_S)
                for partition in range(kafka.partition_count(name, consumer))
            ]
        finally:
            consumer.close()


def dead_letters(settings: Settings, count: int) -> list[RawRecord]:
    """The dead-letter topic's messages once it holds `count` of them (not one more)."""

    def arrived() -> list[RawRecord] | None:
        letters = read_topic(settings, settings.dlq_topic)
        return letters if len(letters) >= count else None

    found = wait_for(arrived, f"{count} dead letters")
    assert len(found) == count, f"{len(found)} dead letters, expected {count}"
    return found


def raw_run_records(settings: Settings, run_key: RunKey) -> list[RawRecord]:
    """Every raw message of the run key in its partition (tombstones included), in order."""
    prefix = run_key_prefix(run_key)
    found = read_partition(settings, settings.results_topic, run_partition(settings, run_key))
    return [r for r in found if r.key is not None and r.key.startswith(prefix)]


def stored_records(settings: Settings, run_key: RunKey) -> list[SampleResult]:
    """Every record written for the run key (superseded ones too), decoded, in offset order."""
    raw = raw_run_records(settings, run_key)
    values = [r.value for r in raw if r.value is not None]
    assert len(values) == len(raw), "a tombstone among the run's records"
    with KafkaConnection(settings) as kafka:
        return [kafka.codec.decode_sample_result(value) for value in values]


def _read_to_end(consumer: Consumer, topic: str, partition: int) -> list[RawRecord]:
    # Retried while transient: a topic made a moment ago may not have elected its leaders.
    low, high = watermark_offsets(consumer, TopicPartition(topic, partition), DEADLINE_S)
    if high <= low:
        return []
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    found: list[RawRecord] = []
    deadline = time.monotonic() + DEADLINE_S
    # The last offset below the high watermark is never compacted away (active segment).
    while not found or found[-1].offset < high - 1:
        if time.monotonic() > deadline:
            pytest.fail(f"could not read {topic}[{partition}] up to offset {high}")
        message = consumer.poll(0.2)
        if message is None:
            continue
        error = message.error()
        if error is not None:
            pytest.fail(f"reading {topic}[{partition}]: {error.str()}")
        found.append(_raw(message))
    return found


def _raw(message: Message) -> RawRecord:
    headers = message.headers() or []
    # The stubs allow a dict too; a consumed message has a list of (name, bytes) pairs.
    pairs = headers.items() if isinstance(headers, dict) else headers
    text = {name: v if isinstance(v, str) else (v or b"").decode() for name, v in pairs}
    return RawRecord(
        message.partition() or 0, message.offset() or 0, message.key(), message.value(), text
    )
