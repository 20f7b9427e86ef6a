"""Hypothesis strategies that build valid records of the contract."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from resultlog.schemas import (
    AsOf,
    Message,
    RecordError,
    RunKey,
    RunSummary,
    SampleResult,
    Score,
    ScoreValue,
    SummaryUsage,
    ToolCall,
    Usage,
    Worker,
)

MAX_LONG = 2**63 - 1
text = st.text(max_size=40)
names = st.text(min_size=1, max_size=24)
counts = st.integers(min_value=0, max_value=MAX_LONG)
small = st.integers(min_value=0, max_value=10_000)
reals = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | reals | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
json_text = json_values.map(json.dumps)
timestamps = st.datetimes(
    min_value=datetime(1970, 1, 1) + timedelta(days=1),
    max_value=datetime(9999, 1, 1),
    timezones=st.just(UTC),
)
run_keys = st.builds(RunKey, names, names, names)

tool_calls = st.builds(ToolCall, id=text, name=names, arguments=json_text)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]) | names,
    content=st.none() | text,
    content_parts=st.none() | json_text,
    tool_calls=st.lists(tool_calls, max_size=2).map(tuple),
    tool_call_id=st.none() | text,
    reasoning=st.none() | text,
    model=st.none() | names,
)
scores = st.builds(
    Score,
    value=st.sampled_from(ScoreValue),
    answer=st.none() | text,
    explanation=text,
    metrics=st.dictionaries(text, reals, max_size=3),
    trajectory=st.none() | json_text,
)
usages = st.builds(
    Usage,
    input_tokens=counts,
    output_tokens=counts,
    total_tokens=counts,
    reasoning_tokens=counts,
    total_cost=st.floats(min_value=0, allow_nan=False, allow_infinity=False),
)
errors = st.builds(
    RecordError, kind=names, message=text, http_status=st.none() | st.integers(100, 599)
)
workers = st.builds(Worker, host=text, pid=counts)


@st.composite
def sample_results(draw: st.DrawFn) -> SampleResult:
    """Any valid SampleResult, degraded or not."""
    epochs = draw(st.integers(min_value=1, max_value=MAX_LONG))
    sample_index = draw(st.integers(min_value=0, max_value=MAX_LONG - 1))
    degraded = draw(st.booleans())
    fields: dict[str, Any] = {
        "run_id": draw(names),
        "chunk_id": draw(st.none() | text),
        "chunk_index": draw(st.none() | counts),
        "benchmark_id": draw(names),
        "model": draw(names),
        "sample_id": draw(names),
        "sample_index": sample_index,
        "epoch": draw(st.integers(min_value=0, max_value=epochs - 1)),
        "epochs": epochs,
        "dataset_size": draw(st.none() | st.integers(sample_index + 1, MAX_LONG)),
        "status": "degraded" if degraded else "completed",
        "score": draw(scores),
        "messages": tuple(draw(st.lists(messages, max_size=3))),
        "response_items": draw(st.none() | json_text),
        "generation_ids": tuple(draw(st.lists(text, max_size=3))),
        "metadata": draw(st.none() | json_text),
        "input": draw(text),
        "target": draw(st.none() | text),
        "usage": draw(st.none() | usages),
        "generation_time_ms": draw(st.none() | counts),
        "error": draw(errors) if degraded else None,
        "worker": draw(st.none() | workers),
        "created_at": draw(timestamps),
    }
    return SampleResult(**fields)


@st.composite
def run_summaries(draw: st.DrawFn) -> RunSummary:
    """Any valid RunSummary."""
    records = draw(counts)
    total = draw(counts)
    offsets = st.dictionaries(st.integers(0, 1000).map(str), counts, max_size=4)
    return RunSummary(
        run_id=draw(names),
        benchmark_id=draw(names),
        model=draw(names),
        records=records,
        expected_records=draw(st.none() | counts),
        degraded_records=draw(st.integers(0, records)),
        total_questions=total,
        correct_answers=draw(st.integers(0, total)),
        skipped_questions=draw(counts),
        accuracy=draw(st.floats(0.0, 1.0)),
        metrics=draw(st.dictionaries(text, reals, max_size=3)),
        usage=draw(
            st.builds(
                SummaryUsage,
                input_tokens=counts,
                output_tokens=counts,
                total_tokens=counts,
                reasoning_tokens=counts,
                total_cost=st.floats(0, 1e9),
            )
        ),
        generation_time_ms=draw(counts),
        as_of=draw(
            st.none() | st.builds(AsOf, computed_at=timestamps, source=names, offsets=offsets)
        ),
    )
