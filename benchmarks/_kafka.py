"""What the benchmarks share: a broker, a realistic record, a patient produce, a raw reader."""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic
from fastavro import schemaless_reader

from resultlog._hotpath import ENV as PURE_PYTHON
from resultlog.broker import LocalKafka
from resultlog.kafka import KafkaConnection
from resultlog.kafka import produce as produce_with_backpressure
from resultlog.schemas import (
    Codec,
    RecordStatus,
    RunKey,
    SampleResult,
    Score,
    ScoreValue,
    ToolCall,
    Usage,
    WriterProcess,
    decode_key,
    encode_key,
    partition_for,
    shipped_catalog,
)
from resultlog.schemas import Message as ChatMessage
from resultlog.settings import Settings

__all__ = [
    "FILL_RUN_RECORDS",
    "ClientConfig",
    "bootstrap_servers",
    "connection",
    "create_topic",
    "encoded_run",
    "end_offsets",
    "fill_runs",
    "own_topics",
    "produce",
    "raw_consume_and_decode",
    "read_to_end",
    "record",
    "relabelled",
    "settings_env",
]

# What confluent-kafka's clients take as configuration.
ClientConfig = dict[str, str | int | float | bool]

_MODEL = "openai/gpt-4o"
# The plain wire format's header before the Avro body (magic byte and schema fingerprint).
_FRAME_BYTES = 10
FILL_SAMPLES, FILL_EPOCHS = 1000, 2
FILL_RUN_RECORDS = FILL_SAMPLES * FILL_EPOCHS
_FILL_WAIT_S = 300.0


def own_topics(prefix: str, **settings: Any) -> Settings:
    """Settings naming every topic and group of their own under a fresh `prefix-<hex>`."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    return Settings(**settings).namespaced(name)


def settings_env(settings: Settings) -> dict[str, str]:
    """This process's environment with `settings` as RESULTLOG_* variables (for a child)."""
    # The fold path's switch is no setting: a child keeps it, so it folds as this process does.
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("RESULTLOG_") or k == PURE_PYTHON
    }
    for name, value in settings.model_dump(exclude_none=True).items():
        env[f"RESULTLOG_{name.upper()}"] = str(value)
    return env


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


def encoded_run(run_key: RunKey, samples: int, epochs: int) -> list[tuple[bytes, bytes]]:
    """(key, value) of every (sample, epoch) of one run, each record built and encoded."""
    codec = Codec()
    return [
        (
            encode_key(run_key, index, epoch),
            codec.encode_sample_result(record(run_key, index, epoch, epochs, samples)),
        )
        for index in range(samples)
        for epoch in range(epochs)
    ]


def relabelled(
    template: list[tuple[bytes, bytes]], template_key: RunKey, run_key: RunKey
) -> list[tuple[bytes, bytes]]:
    """The template run's records as `run_key`'s: the run id's bytes swapped in keys and values.

    An Avro string is its length then its bytes, so a run id of the same length swapped in
    place is exactly the encoding of the same record under the other run id.
    """
    old, new = template_key.run_id.encode(), run_key.run_id.encode()
    if len(old) != len(new) or (template_key.benchmark_id, template_key.model) != (
        run_key.benchmark_id,
        run_key.model,
    ):
        raise ValueError(f"{run_key} cannot be relabelled from {template_key}")
    out = []
    for key, value in template:
        if value.count(old) != 1:
            raise ValueError(f"the run id occurs {value.count(old)} times in a value")
        pair = decode_key(key)
        out.append((encode_key(run_key, pair.sample_index, pair.epoch), value.replace(old, new)))
    return out


def fill_runs(config: ClientConfig, topic: str, partitions: int, records: int) -> float:
    """Top the topic up to `records` records of whole runs (1000 samples x 2 epochs each).

    Runs are `fill-NNNNNN`, numbered on from what the topic already holds (which must be
    this function's writes only); return the seconds spent writing.
    """
    held = sum(end_offsets(config, topic, partitions))
    first_run, last_run = held // FILL_RUN_RECORDS, -(-records // FILL_RUN_RECORDS)
    if first_run >= last_run:
        return 0.0
    started = time.perf_counter()
    template_key = _fill_key(0)
    template = encoded_run(template_key, FILL_SAMPLES, FILL_EPOCHS)
    producer = Producer({**config, "linger.ms": 20, "compression.type": "zstd"})
    for run in range(first_run, last_run):
        run_key = _fill_key(run)
        partition = partition_for(run_key, partitions)
        for key, value in relabelled(template, template_key, run_key):
            produce(producer, topic, key, value, partition)
    producer.flush(300)
    return time.perf_counter() - started


def _fill_key(run: int) -> RunKey:
    return RunKey(f"fill-{run:06d}", "arith", _MODEL)


def end_offsets(config: ClientConfig, topic: str, partitions: int) -> list[int]:
    """Each partition's high watermark (0 for a topic just created)."""
    consumer = Consumer({**config, "group.id": f"bench-{uuid.uuid4().hex}"})
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                return [
                    consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                    for p in range(partitions)
                ]
            except KafkaException:  # a topic just created has no leaders for a moment
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
    finally:
        consumer.close()


def create_topic(config: ClientConfig, topic: str, partitions: int) -> None:
    """Create a compacted results topic unless it exists (a shared, already filled one)."""
    admin = AdminClient(config)
    if topic in admin.list_topics(timeout=30).topics:
        return
    new = NewTopic(topic, partitions, 1, config={"cleanup.policy": "compact"})
    admin.create_topics([new])[topic].result(30)


def raw_consume_and_decode(config: ClientConfig, topic: str, partitions: int) -> int:
    """The naive reader: consume every partition to its end, fastavro-decode each value."""
    schema = shipped_catalog().current("resultlog.SampleResult").parsed
    count = 0
    for message in read_to_end(config, topic, range(partitions)):
        value = message.value()
        assert value is not None, "the benchmark writes no tombstones"
        schemaless_reader(io.BytesIO(value[_FRAME_BYTES:]), schema, schema)
        count += 1
    return count


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
    """A realistic completed tool-using record of about 1.7 kB: texts vary with the pair."""
    a, b = 17 + index % 83, 25 + epoch + index % 61
    question = f"What is {a} + {b}? Show your reasoning, then give the final answer alone."
    answer = str(a + b)
    reasoning = _REASONING.format(a=a, b=b, tens=(a // 10 + b // 10) * 10, units=a % 10 + b % 10)
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
        score=Score(
            value=ScoreValue.C if (index + epoch) % 5 else ScoreValue.I,
            answer=answer,
            explanation=f"numeric match: the last line {answer} equals the target {answer}",
            metrics={"reward": 1.0, "format": 1.0, "latency_s": 1.0 + index % 997 / 1000},
            trajectory=json.dumps({"steps": [{"tool": "calc", "ok": True, "out": answer}]}),
        ),
        messages=(
            ChatMessage(role="system", content=_SYSTEM),
            ChatMessage(role="user", content=question),
            ChatMessage(
                role="assistant",
                content=None,
                reasoning=reasoning,
                tool_calls=(
                    ToolCall(id="call_1", name="calc", arguments=f'{{"expression": "{a} + {b}"}}'),
                ),
                model=_MODEL,
            ),
            ChatMessage(role="tool", content=answer, tool_call_id="call_1"),
            ChatMessage(role="assistant", content=_ANSWER.format(answer=answer), model=_MODEL),
        ),
        generation_ids=(f"gen-{index}-{epoch}-a", f"gen-{index}-{epoch}-b"),
        metadata=json.dumps({"difficulty": "easy", "operands": [a, b]}),
        input=question,
        target=answer,
        usage=Usage(
            input_tokens=312 + index % 50,
            output_tokens=58,
            total_tokens=370 + index % 50,
            reasoning_tokens=21,
            total_cost=4.1e-4,
        ),
        generation_time_ms=1000 + index % 997,
        worker=WriterProcess(host="worker-7", pid=48211),
        created_at=datetime.now(UTC),
    )


_SYSTEM = (
    "You are a careful arithmetic assistant. Think step by step, use the calc tool for any "
    "non-trivial computation, and finish with the bare numeric answer on its own line."
)
_REASONING = (
    "The user asks for {a} + {b} and wants the reasoning shown. Break it into tens and units, "
    "add the tens ({tens}) and the units ({units}) separately, then combine them. The "
    "instructions say to use the calc tool for anything non-trivial; this is simple, but a "
    "tool call is cheap and guards against a slip, so I will confirm with calc before "
    "answering. If the tool disagrees I will redo the column addition carefully, carrying "
    "the one from the units column into the tens column, and report whichever result the "
    "re-check supports. Then I will write the working in prose and put the sum on the last line."
)
_ANSWER = (
    "Split each number into tens and units and add each column, carrying where the units "
    "pass ten. Combining the columns gives {answer}, which the calculator confirms. The "
    "check by subtraction agrees: the sum less either operand gives the other one back, so "
    "the working is consistent.\n{answer}"
)
