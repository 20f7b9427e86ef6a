"""Builders of valid records: the fold's compact `make_record` and the contract's full fields."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from resultlog.schemas import (
    MAX_COST_USD,
    MAX_TOKENS,
    Message,
    RecordError,
    RecordStatus,
    RunKey,
    SampleResult,
    Score,
    ScoreValue,
    Usage,
)

RUN_KEY = RunKey("run-1", "arith", "openai/gpt-4o")
RecordFactory = Callable[..., SampleResult]
_EPOCH0 = datetime(2026, 1, 1, tzinfo=UTC)


def garbage(size: int) -> bytes:
    """Random bytes no framing claims: a leading 0x00 would read as registry framing."""
    return b"\x7f" + os.urandom(size - 1)


def uniform_usage(tokens: int, cost: float) -> Usage:
    """Usage with every token count equal to `tokens`."""
    return Usage(
        input_tokens=tokens,
        output_tokens=tokens,
        total_tokens=tokens,
        reasoning_tokens=tokens,
        total_cost=cost,
    )


# Every count and the cost at the contract's bound (design rule 9).
USAGE_AT_BOUNDS = uniform_usage(MAX_TOKENS, MAX_COST_USD)


def make_record(
    sample_index: int,
    epoch: int,
    value: str = "C",
    *,
    run_key: RunKey = RUN_KEY,
    epochs: int = 3,
    dataset_size: int | None = 100,
    degraded: bool = False,
    metrics: dict[str, float] | None = None,
    numeric: float | None = None,
    tokens: int = 10,
    cost: float = 0.001,
    generation_time_ms: int = 20,
    created_offset_ms: int = 0,
    **overrides: Any,
) -> SampleResult:
    """A valid SampleResult for (sample_index, epoch) with a realistic payload."""
    usage = None
    error = None
    if degraded:
        error = RecordError(kind="model_error", message="HTTP 429", http_status=429)
    else:
        usage = Usage(
            input_tokens=tokens,
            output_tokens=tokens // 2,
            total_tokens=tokens + tokens // 2,
            reasoning_tokens=1,
            total_cost=cost,
        )
    fields: dict[str, Any] = {
        "run_id": run_key.run_id,
        "benchmark_id": run_key.benchmark_id,
        "model": run_key.model,
        "sample_id": f"q{sample_index}",
        "sample_index": sample_index,
        "epoch": epoch,
        "epochs": epochs,
        "dataset_size": dataset_size,
        "status": RecordStatus.DEGRADED if degraded else RecordStatus.COMPLETED,
        "score": Score(
            value=ScoreValue(value), numeric=numeric, answer="42", metrics=metrics or {}
        ),
        "input": f"What is {sample_index} + 1?",
        "target": str(sample_index + 1),
        "usage": usage,
        "generation_time_ms": None if degraded else generation_time_ms,
        "error": error,
        "created_at": _EPOCH0 + timedelta(milliseconds=created_offset_ms),
    }
    fields.update(overrides)
    return SampleResult(**fields)


def record_fields(**overrides: Any) -> dict[str, Any]:
    """Keyword arguments of a valid completed SampleResult with every kind of field, overridden."""
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
