"""What the benchmarks share: a broker, a realistic record, a patient produce, a raw reader."""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
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
from resultlog.kafka import KafkaConnection
from resultlog.kafka import produce as produce_with_backpressure
from resultlog.schemas import Message as ChatMessage
from resultlog.schemas import RecordStatus, RunKey, SampleResult, Score, ScoreValue, Usage
from resultlog.settings import Settings

__all__ = ["ClientConfig", "bootstrap_servers", "connection", "produce", "read_to_end", "record"]

# What confluent-kafka's clients take as configuration.
ClientConfig = dict[str, str | int | float | bool]

_MODEL = "openai/gpt-4o"
_FILL_WAIT_S = 300.0


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


def connection(bootstrap: str, results_topic: str, partitions: int) -> KafkaConnection:
    """A connection to `bootstrap` whose results topic is the benchmark's own."""
    settings = Settings(
        bootstrap_servers=bootstrap, results_topic=results_topic, partitions=partitions
    )
    return KafkaConnection(settings)


def produce(producer: Producer, topic: str, key: bytes, value: bytes, partition: int) -> None:
    """Produce one message, waiting as long as a bulk fill needs for room in the local queue."""
    produce_with_backpressure(producer, topic, key, value, partition=partition, wait_s=_FILL_WAIT_S)


def read_to_end(config: ClientConfig, topic: str, partitions: Iterable[int]) -> Iterator[Message]:
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


def record(run_key: RunKey, index: int, epoch: int, epochs: int, size: int) -> SampleResult:
    """A realistic completed record: a prompt, an answer, usage and a metric."""
    question = f"What is {index} + {epoch}?"
    return SampleResult(
        run_id=run_key.run_id,
        benchmark_id=run_key.benchmark_id,
        model=run_key.model,
        sample_id=f"q{index:06d}",
        sample_index=index,
        epoch=epoch,
        epochs=epochs,
        dataset_size=size,
        status=RecordStatus.COMPLETED,
        score=Score(value=ScoreValue.C, answer=str(index + epoch), metrics={"reward": 1.0}),
        messages=(
            ChatMessage(role="system", content="Answer the arithmetic question."),
            ChatMessage(role="user", content=question),
            ChatMessage(role="assistant", content=f"The answer is {index + epoch}.", model=_MODEL),
        ),
        generation_ids=(f"gen-{index}-{epoch}",),
        input=question,
        target=str(index + epoch),
        usage=Usage(input_tokens=40, output_tokens=9, total_tokens=49, total_cost=4.9e-5),
        generation_time_ms=420,
        created_at=datetime.now(UTC),
    )
