"""Fixtures for the contract's tests: record factories and schema registries."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from resultlog.schemas import (
    Codec,
    RecordError,
    RunSummary,
    SampleResult,
    Score,
    ScoreValue,
)
from tests.support.apicurio import ApicurioRegistry, start_apicurio
from tests.support.records import RecordFactory, record_fields


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
