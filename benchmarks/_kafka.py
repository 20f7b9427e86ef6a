"""Kafka plumbing shared by the benchmarks: a broker, a blocking produce, a raw reader."""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)

from resultlog.broker import LocalKafka

__all__ = ["bootstrap_servers", "produce", "read_to_end"]


@contextlib.contextmanager
def bootstrap_servers() -> Iterator[str]:
    """RESULTLOG_BOOTSTRAP_SERVERS, or a launcher broker in a temporary directory."""
    configured = os.environ.get("RESULTLOG_BOOTSTRAP_SERVERS")
    if configured:
        yield configured
        return
    kafka = LocalKafka(Path(tempfile.mkdtemp(prefix="resultlog-bench-")))
    try:
        yield kafka.up(port=0)
    finally:
        kafka.down()


def produce(producer: Producer, topic: str, key: bytes, value: bytes, partition: int) -> None:
    """Produce one message, waiting for room in the local queue instead of failing."""
    while True:
        try:
            producer.produce(topic, key=key, value=value, partition=partition)
            break
        except BufferError:
            producer.poll(0.1)
    producer.poll(0)


def read_to_end(
    config: dict[str, object], topic: str, partitions: Iterable[int]
) -> Iterator[Message]:
    """Every message of the partitions up to their current end (fetch settings as ours)."""
    consumer = Consumer(
        {
            **config,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
        }
    )
    wanted = set(partitions)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in wanted])
    try:
        while wanted:
            for message in consumer.consume(10_000, timeout=0.1):
                error = message.error()
                if error is None:
                    yield message
                elif error.code() == KafkaError._PARTITION_EOF:
                    wanted.discard(message.partition() or 0)
    finally:
        consumer.close()
