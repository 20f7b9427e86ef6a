"""Fixtures for the contract's tests: record factories and schema registries."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from resultlog.schemas import (
    Codec,
    Message,
    RecordError,
    RunSummary,
    SampleResult,
    Score,
    ScoreValue,
    Usage,
)
from tests.schemas.apicurio import ApicurioRegistry, start_apicurio

RecordFactory = Callable[..., SampleResult]


def record_fields(**overrides: Any) -> dict[str, Any]:
    """Keyword arguments of a valid completed SampleResult, with overrides."""
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "chunk_id": "run-1-chunk-0",
        "chunk_index": 0,
        "benchmark_id": "arith",
        "model": "openai/gpt-4o",
        "sample_id": "arith-0007",
        "sample_index": 7,
        "epoch": 1,
        "epochs": 2,
        "dataset_size": 1000,
        "status": "completed",
        "score": Score(
            value=ScoreValue.C, answer="42", explanation="exact", metrics={"reward": 1.0}
        ),
        "messages": (
            Message(role="user", content="What is 17 + 25?"),
            Message(role="assistant", content="42", model="openai/gpt-4o"),
        ),
        "generation_ids": ("gen-1",),
        "metadata": '{"difficulty": "easy"}',
        "input": "What is 17 + 25?",
        "target": "42",
        "usage": Usage(input_tokens=12, output_tokens=3, total_tokens=15, total_cost=0.0001),
        "generation_time_ms": 830,
        "created_at": datetime(2026, 11, 29, 7, 30, 12, 345000, tzinfo=UTC),
    }
    fields.update(overrides)
    return fields


@pytest.fixture
def make_record() -> RecordFactory:
    """Build a valid SampleResult, overriding any field."""
    return lambda **overrides: SampleResult(**record_fields(**overrides))


@pytest.fixture
def degraded_record(make_record: RecordFactory) -> SampleResult:
    """A degraded outcome synthesized from a 429."""
    return make_record(
        status="degraded",
        score=Score(value=ScoreValue.S, explanation="rate limited"),
        error=RecordError(kind="model_error", message="429 Too Many Requests", http_status=429),
        usage=None,
        generation_time_ms=None,
    )


@pytest.fixture
def summary() -> RunSummary:
    """A valid RunSummary."""
    return RunSummary(
        run_id="run-1",
        benchmark_id="arith",
        model="openai/gpt-4o",
        records=4,
        expected_records=6,
        degraded_records=1,
        total_questions=2,
        correct_answers=1,
        skipped_questions=1,
        accuracy=0.75,
        metrics={"reward": 0.5},
        generation_time_ms=2400,
    )


@pytest.fixture
def codec() -> Codec:
    """A single-object codec over the shipped schemas."""
    return Codec()


@pytest.fixture(scope="session")
def apicurio() -> Iterator[ApicurioRegistry]:
    """A real Apicurio Registry (in-memory storage) on an OS-chosen loopback port."""
    with start_apicurio() as registry:
        yield registry
