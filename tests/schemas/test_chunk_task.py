"""ChunkTask: the work topic's record, its key, partition, bounds and both framings."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from pydantic import ValidationError

from resultlog.schemas import (
    ChunkTask,
    Codec,
    DecodeError,
    Location,
    RunKey,
    SampleResult,
    UnknownSchemaError,
    partition_for,
    shipped_catalog,
    task_key,
)
from resultlog.schemas._catalog import CHUNK_TASK
from tests.support.records import record_fields


def task_fields(**overrides: Any) -> dict[str, Any]:
    """Keyword arguments of a valid ChunkTask, with overrides."""
    fields: dict[str, Any] = {
        "run_id": "run/1",
        "benchmark_id": "arith",
        "model": "openai/gpt-4o",
        "chunk_index": 2,
        "chunks": 4,
        "chunk_id": "run/1/chunk-2-of-4",
        "start": 50,
        "end": 75,
        "benchmark": "arith",
        "dataset_sha256": "ab" * 32,
        "dataset_size": 100,
        "epochs": 3,
        "limit": 100,
        "base_url": "https://openrouter.ai/api/v1",
        "temperature": 0.7,
        "max_tokens": 512,
        "created_at": datetime(2026, 11, 29, 7, 30, 12, 345000, tzinfo=UTC),
    }
    fields.update(overrides)
    return fields


def test_a_task_round_trips_in_single_object_encoding() -> None:
    task = ChunkTask(**task_fields())
    raw = Codec().encode_chunk_task(task)
    assert raw[:2] == b"\xc3\x01"
    assert raw[2:10] == shipped_catalog().current(CHUNK_TASK).fingerprint
    assert Codec().decode_chunk_task(raw) == task


def test_a_task_round_trips_in_registry_framing() -> None:
    client = SchemaRegistryClient.new_client({"url": "mock://chunk-tasks"})
    codec = Codec(registry_client=client)
    task = ChunkTask(**task_fields(range_start=10, range_end=90, limit=None))
    raw = codec.encode_chunk_task(task, "resultlog.work")
    assert raw[0] == 0
    assert codec.decode_chunk_task(raw, at=Location("resultlog.work")) == task
    assert client.get_latest_version("resultlog.work-value").schema_id == int.from_bytes(
        raw[1:5], "big"
    )


def test_the_key_is_the_run_key_then_the_chunk_index() -> None:
    task = ChunkTask(**task_fields())
    assert task.key == b"run%2F1/arith/openai%2Fgpt-4o/2"
    assert task_key(task.run_key, 2) == task.key
    assert task.sample_range == (50, 75)


def test_a_runs_chunks_take_consecutive_partitions_from_its_own() -> None:
    run_key = RunKey("run/1", "arith", "openai/gpt-4o")
    first = partition_for(run_key, 6)
    tasks = [ChunkTask(**task_fields(chunk_index=i, chunks=6)) for i in range(6)]
    assert [t.partition(6) for t in tasks] == [(first + i) % 6 for i in range(6)]
    assert sorted(t.partition(6) for t in tasks) == list(range(6))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"chunk_index": 4}, "chunk_index must be < chunks"),
        ({"start": 75}, r"chunk \[75, 75\) must lie in the run's samples \[0, 100\)"),
        ({"end": 101}, r"must lie in the run's samples \[0, 100\)"),
        ({"range_start": 60, "range_end": 90}, r"must lie in the run's samples \[60, 90\)"),
        ({"range_start": 10}, "set together"),
        ({"dataset_sha256": "AB" * 32}, "dataset_sha256"),
        ({"base_url": "ftp://x"}, "base_url"),
        ({"temperature": 2.5}, "temperature"),
        ({"budget_usd": -1.0}, "budget_usd"),
        ({"epochs": 0}, "epochs"),
        ({"api_key": "sk-secret"}, "api_key"),
    ],
)
def test_invalid_tasks_are_refused_naming_the_field(
    overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        ChunkTask(**task_fields(**overrides))


def test_other_record_types_are_not_read_as_tasks() -> None:
    codec = Codec()
    record = codec.encode_sample_result(SampleResult(**record_fields()))
    with pytest.raises(UnknownSchemaError, match=r"expected resultlog\.ChunkTask"):
        codec.decode_chunk_task(record, at=Location("resultlog.work", 1, 7))
    with pytest.raises(DecodeError, match=r"at resultlog\.work\[0\]@3"):
        codec.decode_chunk_task(b"garbage", at=Location("resultlog.work", 0, 3))
