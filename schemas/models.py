"""SampleResult and its parts: the one place records are built and read through."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Generic, Literal, Self, TypeVar

from pydantic import Field, model_validator

from resultlog.schemas._types import (
    Cost,
    Count,
    Frozen,
    HttpStatus,
    Index,
    JsonText,
    Millis,
    NonEmptyStr,
    PositiveIndex,
    RecordMetrics,
    RunKeyPart,
    Timestamp,
    Tokens,
    UnitInterval,
)
from resultlog.schemas.keys import encode_key
from resultlog.schemas.runkey import RunKeyed

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
MAX_HARNESS_PAYLOAD = 512 * 1024
"""Bytes of a compressed harness payload at most, so a record stays well under a message."""


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
    numeric: UnitInterval | None = None
    metrics: RecordMetrics = Field(default_factory=dict)
    answer: str | None = None
    explanation: str = ""
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
    reasoning_details: JsonText | None = None
    citations: JsonText | None = None


class Usage(Frozen):
    """Token usage and cost of one (sample, epoch)."""

    input_tokens: Tokens
    output_tokens: Tokens
    total_tokens: Tokens
    reasoning_tokens: Tokens = 0
    total_cost: Cost = 0.0


class RecordError(Frozen):
    """Why a degraded outcome was synthesized."""

    kind: NonEmptyStr
    message: str
    http_status: HttpStatus | None = None


class Harness(Frozen):
    """The evaluation harness that produced a record (e.g. inspect_ai)."""

    name: NonEmptyStr
    version: str


class WriterProcess(Frozen):
    """The process that wrote the record."""

    host: str
    pid: Count


_At = TypeVar("_At")


class RecordHead(RunKeyed, Frozen, Generic[_At]):
    """The fields a record leads with (the fold's: schema v3's first 19, in its order) and
    the rules across them, declared once for SampleResult and its fold view
    (`schemas._view.FoldView`), so both accept and answer alike. `created_at` is of type
    `_At`: a datetime in a SampleResult, the wire's milliseconds in a fold view."""

    format_version: Literal[1] = 1
    run_id: RunKeyPart
    benchmark_id: RunKeyPart
    model: RunKeyPart
    sample_index: Index
    epoch: Index
    sample_id: NonEmptyStr
    status: RecordStatus
    created_at: _At
    epochs: PositiveIndex
    dataset_size: Index | None = None
    selected_samples: PositiveIndex | None = None
    usage: Usage | None = None
    generation_time_ms: Millis | None = None
    attempts: Index | None = None
    spent_cost: Cost | None = None
    config_fingerprint: NonEmptyStr | None = None
    score: Score
    error: RecordError | None = None

    @model_validator(mode="after")
    def _check_record_rules(self) -> Self:
        """Refuse what the Avro types cannot express: epoch, index and selection within the
        run's shape, an error exactly when degraded, a spend that includes the kept cost."""
        if self.epoch >= self.epochs:
            raise ValueError(f"epoch must be < epochs (epoch={self.epoch}, epochs={self.epochs})")
        if self.dataset_size is not None and self.sample_index >= self.dataset_size:
            raise ValueError(
                f"sample_index must be < dataset_size "
                f"(sample_index={self.sample_index}, dataset_size={self.dataset_size})"
            )
        selected, size = self.selected_samples, self.dataset_size
        if selected is not None and size is not None and selected > size:
            raise ValueError(
                f"selected_samples must be <= dataset_size "
                f"(selected_samples={selected}, dataset_size={size})"
            )
        degraded = self.status is RecordStatus.DEGRADED
        if degraded and self.error is None:
            raise ValueError("error is required when status is 'degraded'")
        if not degraded and self.error is not None:
            raise ValueError("error must be null when status is 'completed'")
        kept = self.kept_cost
        if self.spent_cost is not None and self.spent_cost < kept:
            raise ValueError(
                f"spent_cost must be >= usage.total_cost, which it includes "
                f"(spent_cost={self.spent_cost}, usage.total_cost={kept})"
            )
        return self

    @property
    def degraded(self) -> bool:
        """True for an outcome synthesized from an error."""
        return self.status is RecordStatus.DEGRADED

    @property
    def kept_cost(self) -> float:
        """The cost of the attempt this record keeps (its usage)."""
        return self.usage.total_cost if self.usage is not None else 0.0

    @property
    def spent(self) -> float:
        """What this key has cost so far: spent_cost, or the kept cost for a v1 record."""
        return self.kept_cost if self.spent_cost is None else self.spent_cost


class SampleResult(RecordHead[Timestamp]):
    """One result event, keyed by run key + (sample_index, epoch)."""

    chunk_id: str | None = None
    chunk_index: Index | None = None
    worker: WriterProcess | None = None
    generation_ids: tuple[str, ...] = ()
    target: str | None = None
    input: str
    messages: tuple[Message, ...] = ()
    response_items: JsonText | None = None
    metadata: JsonText | None = None
    truncated: JsonText | None = None
    config: JsonText | None = None
    harness: Harness | None = None
    harness_payload: bytes | None = Field(default=None, max_length=MAX_HARNESS_PAYLOAD)

    @model_validator(mode="after")
    def _check_invariants(self) -> Self:
        """Cross-field rules the Avro types cannot express (after the head's)."""
        if (self.config is None) != (self.config_fingerprint is None):
            raise ValueError("config and config_fingerprint are set together or not at all")
        return self

    @property
    def created_at_ms(self) -> int:
        """`created_at` in milliseconds since the epoch, as the wire (and a FoldView) holds it."""
        return (self.created_at - _EPOCH) // _MILLISECOND

    @property
    def key(self) -> bytes:
        """The record's Kafka key on the sample-results topic."""
        return encode_key(self.run_key, self.sample_index, self.epoch)
