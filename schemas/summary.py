"""RunSummary: the fold of one run key's records, as published and served."""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from resultlog.schemas._types import (
    Count,
    Frozen,
    Metrics,
    NonEmptyStr,
    NonNegativeReal,
    RunKeyPart,
    Timestamp,
)
from resultlog.schemas.keys import encode_run_key
from resultlog.schemas.runkey import RunKeyed

_PARTITION = re.compile(r"0|[1-9][0-9]*")


class SummaryUsage(Frozen):
    """Usage summed over every record of the run."""

    input_tokens: Count = 0
    output_tokens: Count = 0
    total_tokens: Count = 0
    reasoning_tokens: Count = 0
    total_cost: NonNegativeReal = 0.0


class AsOf(Frozen):
    """Freshness: when, by whom, and up to which offsets a summary was computed."""

    computed_at: Timestamp
    source: NonEmptyStr
    offsets: dict[str, Count] = Field(default_factory=dict)

    @field_validator("offsets")
    @classmethod
    def _partition_keys(cls, offsets: dict[str, int]) -> dict[str, int]:
        """Keys are partition numbers written as canonical decimal text."""
        for key in offsets:
            if not _PARTITION.fullmatch(key):
                raise ValueError(f"offsets key {key!r} is not a partition number")
        return offsets


class RunSummary(RunKeyed, Frozen):
    """Aggregate of a run key's latest records (docs/design.md, rules 12 and 13)."""

    format_version: Literal[1] = 1
    run_id: RunKeyPart
    benchmark_id: RunKeyPart
    model: RunKeyPart
    records: Count
    expected_records: Count | None = None
    degraded_records: Count
    total_questions: Count
    correct_answers: Count
    skipped_questions: Count
    accuracy: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    metrics: Metrics = Field(default_factory=dict)
    usage: SummaryUsage = Field(default_factory=SummaryUsage)
    generation_time_ms: Count = 0
    spent_cost: NonNegativeReal = 0.0
    out_of_shape: Count = 0
    as_of: AsOf | None = None

    @model_validator(mode="after")
    def _check_counts(self) -> Self:
        """Counts that cannot be true of any fold."""
        if self.degraded_records > self.records:
            raise ValueError(
                f"degraded_records must be <= records "
                f"(degraded_records={self.degraded_records}, records={self.records})"
            )
        if self.correct_answers > self.total_questions:
            raise ValueError(
                f"correct_answers must be <= total_questions "
                f"(correct_answers={self.correct_answers}, total_questions={self.total_questions})"
            )
        return self

    @property
    def key(self) -> bytes:
        """The summary's Kafka key on the run-summaries topic."""
        return encode_run_key(self.run_key)
