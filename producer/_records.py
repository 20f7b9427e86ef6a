"""Turn one (sample, epoch) outcome into a SampleResult record."""

from __future__ import annotations

import json
import math
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from resultlog.producer._config import RunConfig, config_fields
from resultlog.producer._scorers import Scored
from resultlog.producer.datasets import Sample
from resultlog.producer.model_client import Completion
from resultlog.schemas import (
    TRUSTED_JSON,
    FoldView,
    RecordStatus,
    RunKey,
    SampleResult,
    ScoreValue,
    WriterProcess,
)

__all__ = [
    "INPUT_REF",
    "Bill",
    "RunIdentity",
    "bill_after",
    "completed_record",
    "degraded_record",
]

INPUT_REF = '{"ref":"input"}'
"""`content_parts` of a prompt message whose text is the record's `input`, kept once there."""


class Bill(NamedTuple):
    """A key's ledger as its new record carries it: model attempts and spend, across runs."""

    attempts: int
    spent_cost: float


def bill_after(
    before: SampleResult | FoldView | None,
    attempt_costs: Sequence[float],
    *,
    least_attempts: int = 0,
    kept: float = 0.0,
) -> Bill:
    """The key's ledger after this run's attempts: its previous record's, plus these.

    `attempt_costs` are the attempts the model client counted; a solver that does not use
    it is taken at its word (`least_attempts`, and the `kept` cost of its completion).
    """
    attempts = (before.attempts or 0) if before is not None else 0
    spent = before.spent if before is not None else 0.0
    return Bill(
        attempts=attempts + max(len(attempt_costs), least_attempts),
        spent_cost=spent + max(math.fsum(attempt_costs), kept),
    )


@dataclass(frozen=True)
class RunIdentity:
    """What every record of one worker's run shares."""

    run_key: RunKey
    epochs: int
    dataset_size: int
    chunk_id: str | None = None
    chunk_index: int | None = None
    config: RunConfig | None = None
    # Taken when the run starts, in the process that runs it (not at import: forks differ).
    worker: WriterProcess = field(
        default_factory=lambda: WriterProcess(host=socket.gethostname(), pid=os.getpid())
    )

    def fields(self, sample: Sample, epoch: int) -> dict[str, Any]:
        """The record fields that identify the (sample, epoch) and its run."""
        return {
            "run_id": self.run_key.run_id,
            "benchmark_id": self.run_key.benchmark_id,
            "model": self.run_key.model,
            "chunk_id": self.chunk_id,
            "chunk_index": self.chunk_index,
            "sample_id": sample.id,
            "sample_index": sample.index,
            "epoch": epoch,
            "epochs": self.epochs,
            "dataset_size": self.dataset_size,
            "input": sample.input,
            "target": sample.target,
            "metadata": json.dumps(sample.metadata, sort_keys=True) if sample.metadata else None,
            "worker": self.worker,
            "created_at": datetime.now(UTC),
            **config_fields(self.config),
        }


def completed_record(
    run: RunIdentity,
    sample: Sample,
    epoch: int,
    *,
    prompt: Sequence[Mapping[str, Any]],
    completion: Completion,
    scored: Scored,
    generation_ids: Sequence[str] = (),
    bill: Bill | None = None,
) -> SampleResult:
    """The record of a real evaluation; `generation_ids` of every model call, in call order."""
    ids = dict.fromkeys([*generation_ids, *filter(None, [completion.generation_id])])
    return _validated(
        **run.fields(sample, epoch),
        **_ledger(bill),
        status=RecordStatus.COMPLETED,
        score=scored.score_fields(),
        messages=[*_prompt_messages(prompt, sample.input), _assistant_message(completion)],
        response_items=_json_or_none(completion.response_items),
        generation_ids=tuple(ids),
        usage=_usage(completion),
        generation_time_ms=completion.elapsed_ms,
    )


def degraded_record(
    run: RunIdentity,
    sample: Sample,
    epoch: int,
    *,
    value: ScoreValue,
    kind: str,
    message: str,
    http_status: int | None,
    generation_ids: Sequence[str] = (),
    bill: Bill | None = None,
) -> SampleResult:
    """The record of an outcome synthesized from an error; it carries no usage (its bill may
    carry what its attempts cost)."""
    return _validated(
        **run.fields(sample, epoch),
        **_ledger(bill),
        generation_ids=tuple(dict.fromkeys(generation_ids)),
        status=RecordStatus.DEGRADED,
        score={"value": value, "explanation": f"degraded: {message}"},
        error={"kind": kind, "message": message, "http_status": http_status},
    )


def _validated(**fields: Any) -> SampleResult:
    """The record, validated in one pass with its nested parts."""
    # Every JSON-text field was made here by json.dumps or checked by _json_text: the
    # decoder's trusted context spares parsing each one a second time.
    return SampleResult.model_validate(fields, context=TRUSTED_JSON)


def _ledger(bill: Bill | None) -> dict[str, Any]:
    """The record fields `attempts` and `spent_cost` (None without a bill)."""
    if bill is None:
        return {"attempts": None, "spent_cost": None}
    return {"attempts": bill.attempts, "spent_cost": bill.spent_cost}


def _usage(completion: Completion) -> dict[str, Any] | None:
    usage = completion.usage
    if usage is None:
        return None
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "total_cost": usage.cost or 0.0,
    }


def _prompt_messages(prompt: Sequence[Mapping[str, Any]], text: str) -> list[dict[str, Any]]:
    """The prompt's messages; a user turn that is exactly the input refers to `input` instead.

    The input is stored once (it may be most of a long-context record): in `input`, where
    every reader finds it, and the message says so with content_parts INPUT_REF.
    """
    messages = [_prompt_message(message) for message in prompt]
    for message in messages:
        if text and message["role"] == "user" and message["content"] == text:
            message.update(content=None, content_parts=INPUT_REF)
    return messages


def _prompt_message(message: Mapping[str, Any]) -> dict[str, Any]:
    """A prompt message: text content as is, structured parts (images, ...) as JSON text."""
    content = message.get("content")
    parts = None if content is None or isinstance(content, str) else content
    return {
        "role": str(message["role"]),
        "content": content if isinstance(content, str) else None,
        "content_parts": json.dumps(parts, sort_keys=True) if parts is not None else None,
        "tool_call_id": message.get("tool_call_id"),
    }


def _assistant_message(completion: Completion) -> dict[str, Any]:
    calls = [
        {
            "id": str(call.get("id", "")),
            "name": str(call.get("function", {}).get("name") or "unknown"),
            "arguments": _json_text(call.get("function", {}).get("arguments")),
        }
        for call in completion.tool_calls or ()
        if isinstance(call, dict)
    ]
    return {
        "role": "assistant",
        "content": completion.text,
        "tool_calls": calls,
        "reasoning": completion.reasoning,
        "model": completion.model,
        "reasoning_details": _json_or_none(completion.reasoning_details),
        "citations": _json_or_none(completion.citations),
    }


def _json_or_none(value: Any) -> str | None:
    """Free-form content as JSON text (None stays None)."""
    return None if value is None else json.dumps(value, sort_keys=True)


def _json_text(arguments: Any) -> str:
    """Tool-call arguments as JSON text: well-formed text as is, anything else encoded."""
    if isinstance(arguments, str):
        try:
            json.loads(arguments)
        except ValueError:
            return json.dumps(arguments)
        return arguments
    return json.dumps(arguments if arguments is not None else {}, sort_keys=True)
