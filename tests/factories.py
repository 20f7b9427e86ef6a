"""Builders of valid records for tests (not fixtures: plain functions)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import SecretStr

from resultlog.schemas import (
    RecordError,
    RecordStatus,
    RunKey,
    SampleResult,
    Score,
    ScoreValue,
    Usage,
)
from resultlog.settings import Settings

RUN_KEY = RunKey("run-1", "arith", "openai/gpt-4o")
_EPOCH0 = datetime(2026, 1, 1, tzinfo=UTC)


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


def cli_env_for(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment of a `resultlog` child process using these settings (secrets too)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESULTLOG_")}
    for name, value in settings.model_dump(exclude_none=True).items():
        text = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
        env[f"RESULTLOG_{name.upper()}"] = text
    # Degraded pairs retry quickly: the model client's backoff is not under test here.
    env["RESULTLOG_MODEL_RETRY_BACKOFF_S"] = "0.01"
    return {**env, **extra}
