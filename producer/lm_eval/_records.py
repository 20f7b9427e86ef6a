"""lm-eval's logged samples (one per document and filter) as SampleResult records."""

from __future__ import annotations

import json
import numbers
import os
import socket
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from resultlog.consumers import SCORER_PREFIX
from resultlog.producer._harness import carried_metric, harness_record, verdict
from resultlog.producer.lm_eval._answers import Answer, Tokens
from resultlog.producer.lm_eval._config import canonical
from resultlog.producer.lm_eval._durable import TaskState
from resultlog.schemas import Harness, RecordStatus, SampleResult, ScoreValue, WriterProcess

__all__ = ["task_records"]


def task_records(
    task: TaskState, samples: Sequence[Mapping[str, Any]], sizes: Mapping[str, Any]
) -> list[SampleResult]:
    """One record per document: the first filter's first metric as its score, every
    filter's metrics as `scorer:METRIC,FILTER` (lm-eval's own names for them)."""
    by_doc: dict[int, list[Mapping[str, Any]]] = {}
    for sample in samples:
        by_doc.setdefault(int(sample["doc_id"]), []).append(sample)
    size = int(sizes.get("original") or len(by_doc))
    effective = int(sizes.get("effective") or len(by_doc))
    shared = {
        "epoch": 0,
        "epochs": 1,
        "selected_samples": effective if effective < size else None,
        "status": RecordStatus.COMPLETED,
        "config": task.config.canonical,
        "config_fingerprint": task.config.fingerprint,
        "harness": Harness(name="lm_eval", version=_version()),
        "worker": WriterProcess(host=socket.gethostname(), pid=os.getpid()),
    }
    bills = _bills(task.answers.values())
    return [
        _record(
            task,
            doc_id,
            logged,
            {**shared, "dataset_size": max(size, doc_id + 1), **_usage(bills.get(doc_id))},
        )
        for doc_id, logged in sorted(by_doc.items())
    ]


def _bills(answers: Iterable[Answer]) -> dict[int, tuple[float, Tokens | None]]:
    """What each document's answers cost and the tokens they used, by document."""
    bills: dict[int, tuple[float, Tokens | None]] = {}
    for answer in answers:
        if answer.doc_id is None:
            continue
        cost, tokens = bills.get(answer.doc_id, (0.0, None))
        if answer.tokens is not None:
            tokens = answer.tokens.plus(tokens)
        bills[answer.doc_id] = (cost + answer.cost, tokens)
    return bills


def _usage(bill: tuple[float, Tokens | None] | None) -> dict[str, Any]:
    """The record's usage and spent_cost: none when the endpoint reported nothing."""
    if bill is None or (bill[1] is None and bill[0] == 0.0):
        return {}
    cost, tokens = bill
    used = tokens or Tokens(0, 0, 0)
    usage = {
        "input_tokens": used.input,
        "output_tokens": used.output,
        "total_tokens": used.total,
        "reasoning_tokens": used.reasoning,
        "total_cost": cost,
    }
    return {"usage": usage, "spent_cost": cost}


def _record(
    task: TaskState, doc_id: int, logged: list[Mapping[str, Any]], shared: dict[str, Any]
) -> SampleResult:
    first = logged[0]
    key = task.run_key
    fields = {
        **shared,
        "run_id": key.run_id,
        "benchmark_id": key.benchmark_id,
        "model": key.model,
        "sample_id": str(doc_id),
        "sample_index": doc_id,
        "created_at": datetime.now(UTC),
        "input": _prompt(first.get("arguments")),
        "target": _text(first.get("target")),
        "score": _score(logged),
    }
    return harness_record(fields)


def _score(logged: list[Mapping[str, Any]]) -> dict[str, Any]:
    metrics: dict[str, float] = {}
    for sample in logged:
        for name in sample.get("metrics", ()):
            value = _number(sample.get(name))
            if value is not None:
                metrics[f"{SCORER_PREFIX}{name},{sample.get('filter', 'none')}"] = value
    first = logged[0]
    names = list(first.get("metrics", ()))
    primary = _number(first.get(names[0])) if names else None
    answer = first.get("filtered_resps")
    explanation = f"{names[0]},{first.get('filter', 'none')}" if names else ""
    outcome = verdict(primary)
    if outcome is ScoreValue.S:
        return {"value": outcome, "metrics": metrics, "explanation": explanation}
    return {
        "value": outcome,
        "numeric": primary,
        "answer": _text(answer[0] if isinstance(answer, list) and answer else answer),
        "explanation": explanation,
        "metrics": metrics,
    }


def _number(value: Any) -> float | None:
    """A scalar metric as a float (bools as 0/1); None for anything else or out of bounds."""
    if not isinstance(value, numbers.Real):
        return None
    number = float(value)
    return number if carried_metric(number) else None


def _prompt(arguments: Any) -> str:
    """The document's first request's prompt (a chat as its JSON text)."""
    if isinstance(arguments, list | tuple) and arguments:
        first = arguments[0]
        if isinstance(first, list | tuple) and first:
            prompt = getattr(first[0], "prompt", first[0])
            return prompt if isinstance(prompt, str) else canonical(prompt)
    return canonical(arguments)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _version() -> str:
    from importlib.metadata import version

    return version("lm_eval")
