"""SampleResult and its parts: the one place records are built and read through."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, Self

from pydantic import Field, model_validator

from resultlog.schemas._types import (
    Count,
    Frozen,
    HttpStatus,
    JsonText,
    Metrics,
    NonEmptyStr,
    NonNegativeReal,
    PositiveCount,
    Timestamp,
)
from resultlog.schemas.keys import encode_key
from resultlog.schemas.runkey import RunKey


class ScoreValue(StrEnum):
    """Outcome of one (sample, epoch): correct, incorrect, or skipped (infrastructure)."""

    C = "C"
    I = "I"  # noqa: E741 - the contract's symbol
    S = "S"


class RecordStatus(StrEnum):
    """Whether a record is a real evaluation or synthesized from an error."""

    COMPLETED = "completed"
    DEGRADED = "degraded"


class Score(Frozen):
    """The scorer's verdict on one (sample, epoch)."""

    value: ScoreValue
    answer: str | None = None
    explanation: str = ""
    metrics: Metrics = Field(default_factory=dict)
    trajectory: JsonText | None = None


class ToolCall(Frozen):
    """One tool call an assistant message requested."""

    id: str
    name: NonEmptyStr
    arguments: JsonText = "{}"


class Message(Frozen):
    """One chat message of the sample's transcript."""

    role: NonEmptyStr
    content: str | None = None
    content_parts: JsonText | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    reasoning: str | None = None
    model: str | None = None


class Usage(Frozen):
    """Token usage and cost of one (sample, epoch)."""

    input_tokens: Count
    output_tokens: Count
    total_tokens: Count
    reasoning_tokens: Count = 0
    total_cost: NonNegativeReal = 0.0


class RecordError(Frozen):
    """Why a degraded outcome was synthesized."""

    kind: NonEmptyStr
    message: str
    http_status: HttpStatus | None = None


class Worker(Frozen):
    """The process that wrote the record."""

    host: str
    pid: Count


class SampleResult(Frozen):
    """One result event, keyed by run key + (sample_index, epoch)."""

    format_version: Literal[1] = 1
    run_id: NonEmptyStr
    chunk_id: str | None = None
    chunk_index: Count | None = None
    benchmark_id: NonEmptyStr
    model: NonEmptyStr
    sample_id: NonEmptyStr
    sample_index: Count
    epoch: Count
    epochs: PositiveCount
    dataset_size: Count | None = None
    status: RecordStatus
    score: Score
    messages: tuple[Message, ...] = ()
    response_items: JsonText | None = None
    generation_ids: tuple[str, ...] = ()
    metadata: JsonText | None = None
    input: str
    target: str | None = None
    usage: Usage | None = None
    generation_time_ms: Count | None = None
    error: RecordError | None = None
    worker: Worker | None = None
    created_at: Timestamp

    @model_validator(mode="after")
    def _check_invariants(self) -> Self:
        """Cross-field rules the Avro types cannot express."""
        if self.epoch >= self.epochs:
            raise ValueError(f"epoch must be < epochs (epoch={self.epoch}, epochs={self.epochs})")
        if self.dataset_size is not None and self.sample_index >= self.dataset_size:
            raise ValueError(
                f"sample_index must be < dataset_size "
                f"(sample_index={self.sample_index}, dataset_size={self.dataset_size})"
            )
        degraded = self.status is RecordStatus.DEGRADED
        if degraded and self.error is None:
            raise ValueError("error is required when status is 'degraded'")
        if not degraded and self.error is not None:
            raise ValueError("error must be null when status is 'completed'")
        return self

    @property
    def run_key(self) -> RunKey:
        """The run this record belongs to."""
        return RunKey(self.run_id, self.benchmark_id, self.model)

    @property
    def key(self) -> bytes:
        """The record's Kafka key on the sample-results topic."""
        return encode_key(self.run_key, self.sample_index, self.epoch)

    @property
    def degraded(self) -> bool:
        """True for an outcome synthesized from an error."""
        return self.status is RecordStatus.DEGRADED
