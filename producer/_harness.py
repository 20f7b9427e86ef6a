"""What the harnesses' mappings (Inspect's samples, lm-eval's documents) share when they make
records: a score's verdict, a metric's bounds, and the record made of their fields."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from resultlog.schemas import MAX_METRIC, TRUSTED_JSON, SampleResult, ScoreValue

__all__ = ["carried_metric", "harness_record", "verdict"]


def verdict(numeric: float | None) -> ScoreValue:
    """A harness score's verdict: S unless it is a number in [0, 1], then C from 0.5, else I."""
    if numeric is None or not 0.0 <= numeric <= 1.0:
        return ScoreValue.S
    return ScoreValue.C if numeric >= 0.5 else ScoreValue.I


def carried_metric(number: float) -> bool:
    """Whether a metric's value can be carried: a number within a metric's bounds (not NaN)."""
    return not math.isnan(number) and -MAX_METRIC <= number <= MAX_METRIC


def harness_record(fields: Mapping[str, Any]) -> SampleResult:
    """The record of a mapping's fields (its JSON texts are its own dumps: not parsed again)."""
    return SampleResult.model_validate(fields, context=TRUSTED_JSON)
