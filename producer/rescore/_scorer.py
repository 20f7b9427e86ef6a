"""Scorers of stored answers: the built-ins and any Inspect AI scorer by import path."""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

from resultlog.producer._scorers import (
    Scored,
    exact_match,
    extract_final_number,
    normalize_answer,
    parse_number,
)
from resultlog.producer.rescore._answer import stored_answer, targets
from resultlog.producer.rescore._errors import RescoreError
from resultlog.producer.rescore._grader import Grader, graded
from resultlog.schemas import SampleResult

__all__ = ["BUILT_INS", "RecordScorer", "resolve_scorer"]

BUILT_INS = ("exact", "includes", "match", "pattern:REGEX", "numeric[:TOLERANCE]", "graded")


class RecordScorer(Protocol):
    """Scores one stored record: the record fields its score changes."""

    @property
    def name(self) -> str:
        """The scorer as the command line named it (the configuration's `scorer`)."""
        ...

    @property
    def graded(self) -> bool:
        """Whether it asks a model (through a Grader)."""
        ...

    async def score(self, record: SampleResult, grader: Grader | None) -> dict[str, Any]:
        """The fields the new score changes: `score` (value, answer, explanation, metrics,
        ...), and an Inspect record's `harness_payload` with the sample's new scores."""
        ...


TextScorer = Callable[[list[str], str], Scored]


@dataclass(frozen=True)
class _Builtin:
    """A scorer of the answer's text against the record's targets (any target may match)."""

    name: str
    compare: TextScorer
    graded: bool = False

    async def score(self, record: SampleResult, grader: Grader | None) -> dict[str, Any]:
        """Score the stored answer."""
        return {"score": self.compare(targets(record), stored_answer(record) or "").score_fields()}


@dataclass(frozen=True)
class _Graded:
    """The built-in model-graded scorer: a grader model says C or I."""

    name: str = "graded"
    graded: bool = True

    async def score(self, record: SampleResult, grader: Grader | None) -> dict[str, Any]:
        """Ask the grader about the stored answer."""
        if grader is None:
            raise RescoreError("the graded scorer needs a grader model (--grader-model)")
        return {"score": (await graded(grader, record, stored_answer(record) or "")).score_fields()}


def resolve_scorer(spec: str) -> RecordScorer:
    """The scorer a `--scorer` names; RescoreError naming the choices if none."""
    name, _, argument = spec.partition(":")
    if "." in name:  # an import path: module.path:attribute
        return _inspect_scorer(spec, name, argument)
    if spec == "exact":
        return _Builtin(spec, lambda found, text: _any(exact_match, found, text))
    if spec == "includes":
        return _Builtin(spec, includes)
    if spec == "match":
        return _inspect_scorer(spec, "inspect_ai.scorer", "match")
    if name == "pattern" and argument:
        return _Builtin(spec, _pattern(argument))
    if name == "numeric":
        return _Builtin(spec, _numeric(_tolerance(argument)))
    if spec == "graded":
        return _Graded()
    raise RescoreError(
        f"unknown scorer {spec!r}: use one of {', '.join(BUILT_INS)}, or an Inspect AI scorer "
        "by import path (inspect_ai.scorer:includes, my_pkg.scorers:graded)"
    )


def _inspect_scorer(spec: str, module: str, attribute: str) -> RecordScorer:
    """An Inspect AI scorer; RescoreError if Inspect AI is not installed."""
    try:
        from resultlog.producer.rescore._inspect import inspect_scorer
    except ImportError as exc:
        raise RescoreError(
            f"--scorer {spec} needs Inspect AI ({exc.name} is missing): "
            "pip install '/path/to/resultlog[inspect]' (a checkout or a wheel)"
        ) from exc
    return inspect_scorer(spec, _imported(module, attribute))


def includes(found: list[str], text: str) -> Scored:
    """C when a target occurs in the answer, ignoring case (Inspect's `includes()`)."""
    hit = next((t for t in found if t and t.casefold() in text.casefold()), None)
    said = f"answer includes {hit!r}" if hit is not None else "answer includes no target"
    return Scored("C" if hit is not None else "I", text or None, said)


def _any(scorer: Callable[[str | None, str], Scored], found: list[str], text: str) -> Scored:
    """The first C of the scorer over the targets, else its verdict on the first target."""
    verdicts = [scorer(target, text) for target in found] or [scorer(None, text)]
    return next((v for v in verdicts if v.value == "C"), verdicts[0])


def _pattern(regex: str) -> TextScorer:
    """C when the pattern's first group (or whole match) equals a target, normalized."""
    try:
        compiled = re.compile(regex, re.IGNORECASE)
    except re.error as exc:
        raise RescoreError(f"--scorer pattern:{regex}: not a regular expression: {exc}") from exc

    def compare(found: list[str], text: str) -> Scored:
        hit = compiled.search(text)
        if hit is None:
            return Scored("I", None, f"pattern {regex!r} does not match the answer")
        answer = hit.group(1) if compiled.groups else hit.group(0)
        ok = any(normalize_answer(answer or "") == normalize_answer(t) for t in found)
        verdict = "matches" if ok else "matches no"
        return Scored("C" if ok else "I", answer, f"extracted {answer!r}: {verdict} target")

    return compare


def _tolerance(text: str) -> Decimal:
    if not text:
        return Decimal(0)
    try:
        value = Decimal(text)
    except InvalidOperation:
        value = Decimal(-1)
    if not value.is_finite() or value < 0:
        raise RescoreError(f"--scorer numeric:{text}: the tolerance must be a number >= 0")
    return value


def _numeric(tolerance: Decimal) -> TextScorer:
    """C when the answer's final number is within `tolerance` of a numeric target."""

    def compare(found: list[str], text: str) -> Scored:
        number = extract_final_number(normalize_answer(text))
        if number is None:
            return Scored("I", None, "no number found in the answer", {"reward": 0.0})
        expected = [n for n in map(parse_number, found) if n is not None]
        ok = any(abs(number - n) <= tolerance for n in expected)
        said = f"final number {number} {'is' if ok else 'is not'} within {tolerance} of a target"
        return Scored("C" if ok else "I", str(number), said, {"reward": float(ok)})

    return compare


def _imported(module: str, attribute: str) -> Any:
    """The attribute an import path names; RescoreError if it is not there."""
    if not attribute:
        raise RescoreError(f"--scorer {module}: name the scorer too (module.path:name)")
    try:
        found = importlib.import_module(module)
    except ImportError as exc:
        raise RescoreError(f"--scorer {module}:{attribute}: cannot import {module}: {exc}") from exc
    try:
        return getattr(found, attribute)
    except AttributeError:
        raise RescoreError(f"--scorer {module}:{attribute}: {module} has no {attribute}") from None
