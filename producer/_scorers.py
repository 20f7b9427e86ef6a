"""Scorers: compare a model's completion text with a sample's target."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Literal

__all__ = [
    "Scored",
    "Scorer",
    "exact_match",
    "extract_final_number",
    "normalize_answer",
    "numeric_match",
    "parse_number",
]

_TRAILING_PUNCTUATION = ".,;:!?\"'`)]} \t\n"
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Scored:
    """A real (non-degraded) evaluation: the runner adds `S` for degraded outcomes."""

    value: Literal["C", "I"]
    answer: str | None
    explanation: str
    metrics: dict[str, float] = field(default_factory=dict)
    trajectory: list[dict[str, object]] | None = None
    """The scorer's steps (what it extracted and compared), kept as score.trajectory."""

    def score_fields(self) -> dict[str, object]:
        """The record's score fields it makes (the trajectory as JSON text, keys sorted)."""
        trajectory = self.trajectory
        return {
            "value": self.value,
            "answer": self.answer,
            "explanation": self.explanation,
            "metrics": self.metrics,
            "trajectory": None if trajectory is None else json.dumps(trajectory, sort_keys=True),
        }


Scorer = Callable[[str | None, str], Scored]
"""A scorer takes (target, completion text) and returns a Scored."""


def normalize_answer(text: str) -> str:
    """Strip, lowercase, collapse whitespace and drop trailing punctuation."""
    return _WHITESPACE.sub(" ", text.strip().lower()).rstrip(_TRAILING_PUNCTUATION)


def extract_final_number(text: str) -> Decimal | None:
    """Return the last number in the text (thousands separators allowed), or None."""
    matches = _NUMBER.findall(text)
    if not matches:
        return None
    try:
        return Decimal(matches[-1].replace(",", ""))
    except InvalidOperation:
        return None


def exact_match(target: str | None, text: str) -> Scored:
    """Score C when the normalized completion equals the normalized target."""
    answer = normalize_answer(text)
    if target is None:
        return Scored("I", answer or None, "sample has no target to compare against", {})
    expected = normalize_answer(target)
    ok = answer == expected
    verdict = "matches" if ok else "does not match"
    steps: list[dict[str, object]] = [
        {"step": "normalize", "answer": answer, "target": expected},
        {"step": "compare", "equal": ok},
    ]
    explanation = f"answer {verdict} target {target!r}"
    return Scored("C" if ok else "I", answer or None, explanation, {}, steps)


def numeric_match(target: str | None, text: str) -> Scored:
    """Score C when the completion's final number equals the numeric target; metric `reward`."""
    number = extract_final_number(normalize_answer(text))
    answer = None if number is None else _format_number(number)
    expected = None if target is None else parse_number(target)
    if expected is None:
        return Scored("I", answer, f"target {target!r} is not a number", {"reward": 0.0})
    if number is None:
        return Scored("I", None, "no number found in the completion", {"reward": 0.0})
    ok = number == expected
    verdict = "equals" if ok else "differs from"
    explanation = f"final number {answer} {verdict} target {_format_number(expected)}"
    steps: list[dict[str, object]] = [
        {"step": "extract_final_number", "answer": answer},
        {"step": "compare", "target": _format_number(expected), "equal": ok},
    ]
    reward = {"reward": 1.0 if ok else 0.0}
    return Scored("C" if ok else "I", answer, explanation, reward, steps)


def parse_number(text: str) -> Decimal | None:
    """Parse text that is exactly one number (e.g. `-1,234.5`), or return None."""
    if not _NUMBER.fullmatch(text.strip()):
        return None
    return Decimal(text.strip().replace(",", ""))


def _format_number(value: Decimal) -> str:
    """Render a number without exponent or trailing fractional zeros (42.0 -> 42)."""
    if value == value.to_integral_value():
        return str(int(value))
    return format(value.normalize(), "f")
