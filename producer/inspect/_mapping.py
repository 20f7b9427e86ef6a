"""Turn one finished Inspect sample (an EvalSample) into a SampleResult record."""

from __future__ import annotations

import json
import logging
import math
import re
from datetime import UTC, datetime
from typing import Any

from inspect_ai.log import EvalSample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ContentReasoning,
    ModelUsage,
)
from inspect_ai.scorer import Score as InspectScore
from inspect_ai.scorer import value_to_float
from pydantic_core import to_jsonable_python

from resultlog.consumers import SCORER_PREFIX
from resultlog.producer._harness import carried_metric, harness_record, verdict
from resultlog.producer.inspect._payload import Payload, encode
from resultlog.producer.inspect._task import TaskRun
from resultlog.schemas import Harness, RecordStatus, SampleResult, ScoreValue, WriterProcess

__all__ = ["score_fields", "to_record", "truncated_of"]

_TO_FLOAT = value_to_float()  # C->1, I->0, P->0.5, N->0, yes/no, numbers (a factory)
log = logging.getLogger(__name__)

_HTTP_STATUS = re.compile(r"Error code: (\d{3})\b")


def to_record(
    task: TaskRun, sample: EvalSample, harness: Harness, worker: WriterProcess
) -> SampleResult:
    """The record of a finished (sample, epoch): completed, or degraded (S) if it errored."""
    fields = {**_identity(task, sample), **_outcome(sample)}
    payload = encode(task.header, sample)
    fields |= {
        "worker": worker,
        "created_at": datetime.now(UTC),
        "harness": harness,
        "harness_payload": payload.data,
        "truncated": truncated_of(payload),
    }
    return harness_record(fields)


def _identity(task: TaskRun, sample: EvalSample) -> dict[str, Any]:
    """The fields naming the pair and its run, and what the sample asked."""
    sample_id = str(sample.id)
    return {
        "run_id": task.run_key.run_id,
        "benchmark_id": task.run_key.benchmark_id,
        "model": task.run_key.model,
        "sample_id": sample_id,
        "sample_index": task.index_of(sample_id),
        "epoch": sample.epoch - 1,
        "epochs": task.epochs,
        "dataset_size": task.dataset_size,
        "selected_samples": task.selected_samples,
        "input": _text_or_json(sample.input),
        "target": _text_or_json(sample.target),
        "metadata": _json_or_none(sample.metadata),
        "messages": [_message(message) for message in sample.messages],
        "generation_ids": _generation_ids(sample),
        "config": task.config.canonical,
        "config_fingerprint": task.config.fingerprint,
    }


def _outcome(sample: EvalSample) -> dict[str, Any]:
    """Status, score, usage and timing; or, for an errored sample, the degraded S outcome."""
    if sample.error is None:
        return {
            "status": RecordStatus.COMPLETED,
            "score": score_fields(sample.scores or {}),
            "usage": _usage(sample),
            "generation_time_ms": _generation_time_ms(sample),
        }
    # Inspect leaves an errored sample out of its metrics: S, which the fold drops too.
    message = sample.error.message
    status = _http_status(sample)
    return {
        "status": RecordStatus.DEGRADED,
        "score": {"value": ScoreValue.S, "explanation": f"degraded: {message}"},
        "error": {
            "kind": "model_error" if status is not None else "sample_error",
            "message": message,
            "http_status": status,
        },
    }


def truncated_of(payload: Payload) -> str | None:
    """What was cut from the payload to fit, as the record's `truncated` JSON."""
    if payload.form == "full":
        return None
    cut = {"form": payload.form, "full_json_bytes": payload.full_json_bytes}
    return json.dumps({"harness_payload": cut})


def score_fields(scores: dict[str, InspectScore]) -> dict[str, Any]:
    """The first scorer's C/I value and numeric score; every scorer's values as `scorer:` metrics.

    The C/I accuracy holds only values Inspect maps into [0, 1]; any other first value
    (unscored, a number outside [0, 1], a dict or a list) makes the record S. Every scorer's
    scalar values are carried as per-sample scores, which the fold reduces as Inspect does.
    """
    if not scores:
        return {"value": ScoreValue.S, "explanation": "no scorer scored this sample"}
    named = list(scores.items())
    first_name, first = named[0]
    metrics = dict(pair for scorer, score in named for pair in _scorer_values(scorer, score.value))
    # A scalar first value as a float, None if unscored or a dict or list: the C/I accuracy
    # holds only a value in [0, 1].
    numeric = metrics.get(SCORER_PREFIX + first_name)
    value = verdict(numeric)
    return {
        "value": value,
        "numeric": None if value is ScoreValue.S else numeric,
        "answer": first.answer,
        "explanation": first.explanation or "",
        "metrics": metrics,
    }


def _scorer_values(scorer: str, value: Any) -> list[tuple[str, float]]:
    """A scorer's value as per-sample scores: a scalar as `scorer:NAME`, a dict's scalars as
    `scorer:NAME/KEY` (Inspect's score named KEY); unscored (NaN) values are left out."""
    name = f"{SCORER_PREFIX}{scorer}"
    items = (
        [(f"{name}/{key}", item) for key, item in value.items()]
        if isinstance(value, dict)
        else [(name, value)]
    )
    scored = []
    for metric, item in items:
        if isinstance(item, list | dict | tuple):
            continue  # no metric of Inspect's reduces these: kept in the harness payload
        number = _TO_FLOAT(item)  # as Inspect's reducers do, None and unknown strings are 0
        if math.isnan(number):
            continue  # unscored: Inspect's reductions leave it out
        if not carried_metric(number):
            log.warning("resultlog: %s = %r is out of a metric's bounds; not carried", metric, item)
            continue
        scored.append((metric, number))
    return scored


def _usage(sample: EvalSample) -> dict[str, Any] | None:
    """Token usage and cost summed over the sample's models (not its roles: the same calls)."""
    if not sample.model_usage:
        return None
    total = sum(sample.model_usage.values(), ModelUsage())
    return {
        "input_tokens": total.input_tokens,
        "output_tokens": total.output_tokens,
        "total_tokens": total.total_tokens,
        "reasoning_tokens": total.reasoning_tokens or 0,
        "total_cost": total.total_cost or 0.0,  # None unless Inspect knows the model's prices
    }


def _model_events(sample: EvalSample) -> list[Any]:
    return [event for event in sample.events if event.event == "model"]


def _generation_ids(sample: EvalSample) -> list[str]:
    """Response ids of every model call of the sample, de-duplicated, in call order."""
    ids = (event.output.response_id for event in _model_events(sample))
    return list(dict.fromkeys(filter(None, ids)))


def _generation_time_ms(sample: EvalSample) -> int | None:
    """The working time of the sample's final successful model call."""
    done = [e for e in _model_events(sample) if e.error is None and e.working_time is not None]
    return round(done[-1].working_time * 1000) if done else None


def _http_status(sample: EvalSample) -> int | None:
    """The HTTP status of a failed model call, as the OpenAI SDK words it, if any."""
    texts = [sample.error.message if sample.error else ""]
    texts += [e.error for e in reversed(_model_events(sample)) if e.error]
    for text in texts:
        found = _HTTP_STATUS.search(text)
        if found and 100 <= int(found[1]) <= 599:
            return int(found[1])
    return None


def _message(message: ChatMessage) -> dict[str, Any]:
    content = message.content
    parts = None if isinstance(content, str) else to_jsonable_python(content)
    fields: dict[str, Any] = {
        "role": message.role,
        "content": message.text,
        "content_parts": None if parts is None else json.dumps(parts, sort_keys=True),
    }
    if isinstance(message, ChatMessageAssistant):
        parts_list = [] if isinstance(content, str) else content
        reasoning = [c.reasoning for c in parts_list if isinstance(c, ContentReasoning)]
        fields |= {
            "model": message.model,
            "reasoning": "\n".join(reasoning) if reasoning else None,
            "tool_calls": [
                {
                    "id": call.id,
                    "name": call.function or "unknown",
                    "arguments": json.dumps(to_jsonable_python(call.arguments), sort_keys=True),
                }
                for call in message.tool_calls or ()
            ],
        }
    if isinstance(message, ChatMessageTool):
        fields["tool_call_id"] = message.tool_call_id
    return fields


def _text_or_json(value: str | list[Any]) -> str:
    """Text as is; messages or a list of targets as JSON text."""
    if isinstance(value, str):
        return value
    return json.dumps(to_jsonable_python(value), sort_keys=True)


def _json_or_none(value: dict[str, Any]) -> str | None:
    return json.dumps(to_jsonable_python(value), sort_keys=True) if value else None
