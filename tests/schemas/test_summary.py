"""RunSummary: the published fold of a run."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from resultlog.schemas import AsOf, Codec, RunKey, RunSummary, SummaryUsage


def _summary(**overrides: Any) -> RunSummary:
    """A valid summary with overrides."""
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "benchmark_id": "arith",
        "model": "openai/gpt-4o",
        "records": 4,
        "degraded_records": 1,
        "total_questions": 2,
        "correct_answers": 1,
        "skipped_questions": 1,
        "accuracy": 0.5,
    }
    return RunSummary(**(fields | overrides))


def test_defaults_and_keys() -> None:
    summary = _summary()
    assert summary.format_version == 1
    assert summary.usage == SummaryUsage() and summary.metrics == {}
    assert summary.expected_records is None and summary.as_of is None
    assert summary.run_key == RunKey("run-1", "arith", "openai/gpt-4o")
    assert summary.key == b"run-1/arith/openai%2Fgpt-4o"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"degraded_records": 5}, "degraded_records must be <= records"),
        ({"correct_answers": 3}, "correct_answers must be <= total_questions"),
        ({"accuracy": 1.5}, "accuracy"),
        ({"accuracy": float("nan")}, "accuracy"),
        ({"records": -1}, "records"),
        ({"format_version": 2}, "format_version"),
        ({"metrics": {"reward": float("inf")}}, "metrics"),
    ],
)
def test_impossible_summaries_are_refused(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _summary(**overrides)


def test_as_of_offsets_are_keyed_by_partition_number() -> None:
    now = datetime(2026, 11, 29, 8, 0, 0, 123456, tzinfo=UTC)
    as_of = AsOf(computed_at=now, source="aggregator", offsets={"0": 10, "11": 0})
    assert as_of.computed_at.microsecond == 123000
    for bad in ("p0", "-1", "01", ""):
        with pytest.raises(ValidationError, match="not a partition number"):
            AsOf(computed_at=now, source="replay", offsets={bad: 1})


def test_summary_json_has_the_cli_field_names() -> None:
    as_of = AsOf(computed_at=datetime(2026, 1, 1, tzinfo=UTC), source="replay", offsets={"3": 7})
    dumped = _summary(expected_records=6, as_of=as_of).model_dump(mode="json")
    assert list(dumped) == [
        "format_version",
        "run_id",
        "benchmark_id",
        "model",
        "records",
        "expected_records",
        "degraded_records",
        "total_questions",
        "correct_answers",
        "skipped_questions",
        "accuracy",
        "metrics",
        "usage",
        "generation_time_ms",
        "spent_cost",
        "out_of_shape",
        "as_of",
    ]
    assert list(dumped["usage"]) == [
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "reasoning_tokens",
        "total_cost",
    ]
    assert dumped["as_of"] == {
        "computed_at": "2026-01-01T00:00:00Z",
        "source": "replay",
        "offsets": {"3": 7},
    }


def test_summary_with_as_of_round_trips_through_the_codec() -> None:
    as_of = AsOf(
        computed_at=datetime(2026, 11, 29, 8, 0, 1, 999000, tzinfo=UTC),
        source="worker",
        offsets={"0": 12},
    )
    summary = _summary(as_of=as_of, usage=SummaryUsage(input_tokens=5, total_cost=0.25))
    codec = Codec()
    assert codec.decode_run_summary(codec.encode_run_summary(summary)) == summary
