"""Hypothesis strategies that build valid records of the contract."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from resultlog.schemas import (
    MAX_COST_USD,
    MAX_INDEX,
    MAX_METRIC,
    MAX_MILLIS,
    MAX_TOKENS,
    AsOf,
    Harness,
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
    WriterProcess,
)
from tests.support.records import make_record, uniform_usage

MAX_LONG = 2**63 - 1
text = st.text(max_size=40)
names = st.text(min_size=1, max_size=24)
# What a run key part may be: no controls, bidi marks, line separators or dot segments.
_BIDI = "\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e" + "\u2066\u2067\u2068\u2069"
run_key_parts = st.text(
    st.characters(exclude_categories=("Cc", "Cs"), exclude_characters=_BIDI),
    min_size=1,
    max_size=24,
).filter(lambda part: part not in (".", ".."))
counts = st.integers(min_value=0, max_value=MAX_LONG)
small = st.integers(min_value=0, max_value=10_000)
reals = st.floats(allow_nan=False, allow_infinity=False)
# Rule 9's bounds, with their extremes drawn often: the fold must never raise at a bound.
indexes = st.integers(0, MAX_INDEX) | st.sampled_from([0, MAX_INDEX])
tokens = st.integers(0, MAX_TOKENS) | st.just(MAX_TOKENS)
millis = st.integers(0, MAX_MILLIS) | st.just(MAX_MILLIS)
costs = st.floats(0.0, MAX_COST_USD) | st.sampled_from([0.0, 5e-324, MAX_COST_USD])
metric_values = st.floats(-MAX_METRIC, MAX_METRIC) | st.sampled_from(
    [-MAX_METRIC, MAX_METRIC, -5e-324, 5e-324, 0.0]
)
unit = st.floats(0.0, 1.0) | st.sampled_from([0.0, 1.0, 0.5, 5e-324])
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
run_keys = st.builds(RunKey, run_key_parts, run_key_parts, run_key_parts)

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
    reasoning_details=st.none() | json_text,
    citations=st.none() | json_text,
)
scores = st.builds(
    Score,
    value=st.sampled_from(ScoreValue),
    numeric=st.none() | unit,
    answer=st.none() | text,
    explanation=text,
    metrics=st.dictionaries(text, metric_values, max_size=3),
    trajectory=st.none() | json_text,
)
usages = st.builds(
    Usage,
    input_tokens=tokens,
    output_tokens=tokens,
    total_tokens=tokens,
    reasoning_tokens=tokens,
    total_cost=costs,
)
errors = st.builds(
    RecordError, kind=names, message=text, http_status=st.none() | st.integers(100, 599)
)
workers = st.builds(WriterProcess, host=text, pid=counts)


@st.composite
def sample_results(draw: st.DrawFn) -> SampleResult:
    """Any valid SampleResult, degraded or not."""
    epochs = draw(st.integers(min_value=1, max_value=MAX_INDEX) | st.just(MAX_INDEX))
    sample_index = draw(st.integers(min_value=0, max_value=MAX_INDEX - 1))
    degraded = draw(st.booleans())
    usage = draw(st.none() | usages)
    kept = usage.total_cost if usage is not None else 0.0
    config = draw(st.none() | json_text)
    size = draw(st.none() | st.integers(sample_index + 1, MAX_INDEX))
    fields: dict[str, Any] = {
        "run_id": draw(run_key_parts),
        "chunk_id": draw(st.none() | text),
        "chunk_index": draw(st.none() | indexes),
        "benchmark_id": draw(run_key_parts),
        "model": draw(run_key_parts),
        "sample_id": draw(names),
        "sample_index": sample_index,
        "epoch": draw(st.integers(min_value=0, max_value=epochs - 1)),
        "epochs": epochs,
        "dataset_size": size,
        "selected_samples": draw(st.none() | st.integers(1, size or MAX_INDEX)),
        "status": "degraded" if degraded else "completed",
        "score": draw(scores),
        "messages": tuple(draw(st.lists(messages, max_size=3))),
        "response_items": draw(st.none() | json_text),
        "generation_ids": tuple(draw(st.lists(text, max_size=3))),
        "metadata": draw(st.none() | json_text),
        "input": draw(text),
        "target": draw(st.none() | text),
        "usage": usage,
        "generation_time_ms": draw(st.none() | millis),
        "attempts": draw(st.none() | indexes),
        "spent_cost": draw(st.none() | st.floats(kept, MAX_COST_USD)),
        "config": config,
        "config_fingerprint": None if config is None else draw(names),
        "harness": draw(st.none() | st.builds(Harness, name=names, version=text)),
        "harness_payload": draw(st.none() | st.binary(max_size=64)),
        "truncated": draw(st.none() | json_text),
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
        run_id=draw(run_key_parts),
        benchmark_id=draw(run_key_parts),
        model=draw(run_key_parts),
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
        spent_cost=draw(st.floats(0, 1e15)),
        out_of_shape=draw(counts),
        as_of=draw(
            st.none() | st.builds(AsOf, computed_at=timestamps, source=names, offsets=offsets)
        ),
    )


extreme_metric = st.sampled_from([MAX_METRIC, -MAX_METRIC, 5e-324, -5e-324, 0.1, 0.0]) | st.floats(
    -MAX_METRIC, MAX_METRIC
)


# Plain metrics and `scorer:` ones (per-sample means over scored samples) side by side.
EXTREME_NAMES = ["reward", "m", "scorer:m", "scorer:n"]


@st.composite
def extreme_records(draw: st.DrawFn) -> SampleResult:
    """Records of one run key at the bounds of every folded field, on few keys."""
    value = draw(st.sampled_from(["C", "I", "S"]))
    degraded = value == "S" and draw(st.booleans())
    cost = draw(st.sampled_from([0.0, 5e-324, 0.1, MAX_COST_USD]) | st.floats(0, MAX_COST_USD))
    tokens = draw(st.sampled_from([0, 1, MAX_TOKENS]))
    usage = uniform_usage(tokens, cost)
    epochs = draw(st.integers(1, 3))
    return make_record(
        draw(st.integers(0, 5)),
        draw(st.integers(0, epochs - 1)),
        value,
        epochs=epochs,
        dataset_size=draw(st.sampled_from([None, 6])),
        selected_samples=draw(st.sampled_from([None, 2, 6])),
        degraded=degraded,
        numeric=None
        if value == "S"
        else draw(st.none() | st.sampled_from([0.0, 5e-324, 0.5, 1.0])),
        metrics=draw(st.dictionaries(st.sampled_from(EXTREME_NAMES), extreme_metric, max_size=3)),
        usage=None if degraded else usage,
        spent_cost=draw(st.none() | st.sampled_from([MAX_COST_USD])) if not degraded else None,
        generation_time_ms=draw(st.sampled_from([0, MAX_MILLIS])),
        created_offset_ms=draw(st.integers(0, 4)),
    )
