"""The fold view: the leading fields of a SampleResult that the fold reads, decoded alone.

Avro reads a record's fields in order, so reading a value with its writer schema cut after
the last field the fold needs decodes that prefix and leaves the rest of the bytes unread.
Schemas v2 and v3 put every folded field first (format_version ... score, then error), so
the view never touches messages, input, target, metadata or config. The prefix is validated
by the same constrained types as `SampleResult`; the bytes after it are not read.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, Literal, Self, TypedDict

import fastavro
from pydantic import model_validator

from resultlog.schemas._catalog import SchemaVersion
from resultlog.schemas._types import (
    MAX_COST_USD,
    MAX_INDEX,
    MAX_METRIC,
    MAX_MILLIS,
    MAX_TOKENS,
    Cost,
    Frozen,
    Index,
    Millis,
    NonEmptyStr,
    PositiveIndex,
    RunKeyPart,
)
from resultlog.schemas.models import RecordError, RecordRules, RecordStatus, Score, Usage
from resultlog.schemas.runkey import is_run_key_part

__all__ = [
    "FOLD_FIELDS",
    "FoldFields",
    "FoldView",
    "ViewPlan",
    "ViewPlans",
    "accepts",
    "millis_error",
]

FOLD_FIELDS: Final = (
    "format_version",
    "run_id",
    "benchmark_id",
    "model",
    "sample_index",
    "epoch",
    "sample_id",
    "status",
    "created_at",
    "epochs",
    "dataset_size",
    "selected_samples",
    "usage",
    "generation_time_ms",
    "attempts",
    "spent_cost",
    "config_fingerprint",
    "score",
    "error",
)
"""The SampleResult fields a fold view holds, in schema v3's order (its first 19 fields).

`error` is not folded, but reading it (one null byte in a completed record) keeps the rule
"error is set exactly when status is degraded" checked.
"""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DAY_MS = 86_400_000
# The instants a datetime holds: outside them the full decode's timestamp-millis read fails.
_FIRST_MS: Final = (datetime(1, 1, 1, tzinfo=UTC) - _EPOCH).days * _DAY_MS
_LAST_MS: Final = ((datetime(9999, 12, 31, tzinfo=UTC) - _EPOCH).days + 1) * _DAY_MS - 1


def millis_error(datum: dict[str, Any]) -> str | None:
    """Move `created_at` to `created_at_ms`; why it is no datetime, if it is not one."""
    millis = datum["created_at_ms"] = datum.pop("created_at")
    if type(millis) is int and _FIRST_MS <= millis <= _LAST_MS:
        return None
    return f"created_at {millis!r} ms is not a datetime (year 1 to 9999)"


class FoldView(RecordRules, Frozen):
    """The fields of a SampleResult the fold reads, validated as a SampleResult validates them.

    Read by `Codec.decode_fold_view`. `created_at_ms` is the record's `created_at` as the
    wire holds it (milliseconds since the epoch). What follows `error` in the record is
    neither read nor validated: `Codec.decode_sample_result` gives the whole record.
    """

    format_version: Literal[1] = 1
    run_id: RunKeyPart
    benchmark_id: RunKeyPart
    model: RunKeyPart
    sample_index: Index
    epoch: Index
    sample_id: NonEmptyStr
    status: RecordStatus
    created_at_ms: int
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
    def _check_invariants(self) -> Self:
        """SampleResult's cross-field rules (they involve only the view's fields)."""
        self.check_record_rules()
        return self


ViewPlan = tuple[dict[str, Any], dict[str, Any] | None]
"""How to read a view out of one writer's bytes: the cut writer schema and the reader schema
(None when the writer is the current version, read as it is)."""


def _parsed(definition: dict[str, Any]) -> dict[str, Any]:
    """A record schema parsed by fastavro."""
    parsed = fastavro.parse_schema(definition)
    assert isinstance(parsed, dict)  # a record's definition parses to a record
    return parsed


def _cut(definition: Mapping[str, Any]) -> dict[str, Any]:
    """A record schema cut after its last fold field, `created_at` read as a plain long."""
    cut = copy.deepcopy(dict(definition))
    fields = cut["fields"]
    last = max((i for i, f in enumerate(fields) if f["name"] in FOLD_FIELDS), default=-1)
    cut["fields"] = fields[: last + 1]
    for item in cut["fields"]:
        if item["name"] == "created_at" and isinstance(item["type"], dict):
            item["type"] = "long"  # same bytes; the view keeps the wire's milliseconds
    return cut


class ViewPlans:
    """One read plan per writer schema met, all resolving into the current version's prefix."""

    def __init__(self, reader: SchemaVersion) -> None:
        names = [f["name"] for f in reader.definition["fields"]]
        if tuple(names[: len(FOLD_FIELDS)]) != FOLD_FIELDS:
            raise ValueError(f"{reader.name} v{reader.version} does not lead with the fold fields")
        self.reader = _parsed(_cut(reader.definition))
        self._plans: dict[bytes, ViewPlan] = {reader.fingerprint: (self.reader, None)}

    def plan(self, writer: SchemaVersion) -> ViewPlan:
        """How to read the view out of this writer's bytes (an older or newer version too)."""
        plan = self._plans.get(writer.fingerprint)
        if plan is None:
            plan = self._plans[writer.fingerprint] = (_parsed(_cut(writer.definition)), self.reader)
        return plan


class UsageFields(TypedDict):
    """A record's usage as the wire holds it."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    reasoning_tokens: int
    total_cost: float


class ScoreFields(TypedDict):
    """A record's score as the wire holds it (`value` is "C", "I" or "S")."""

    value: str
    numeric: float | None
    metrics: dict[str, float]
    answer: str | None
    explanation: str
    trajectory: str | None


class FoldFields(TypedDict):
    """The fold view's fields as plain values, accepted exactly when FoldView accepts them.

    Read by `Codec.decode_fold_fields`: the same checks as FoldView without building models.
    `status` is "completed" or "degraded"; `error` is a dict or None.
    """

    format_version: int
    run_id: str
    benchmark_id: str
    model: str
    sample_index: int
    epoch: int
    sample_id: str
    status: str
    epochs: int
    dataset_size: int | None
    selected_samples: int | None
    usage: UsageFields | None
    generation_time_ms: int | None
    attempts: int | None
    spent_cost: float | None
    config_fingerprint: str | None
    score: ScoreFields
    error: dict[str, Any] | None
    created_at_ms: int


# The bounds of rule 9 (schemas._types), as FoldView's types apply them. An Avro datum holds
# only ints, floats, strs, dicts and None, so a type test by identity is pydantic's strict one.
_HTTP_STATUS = range(100, 600)  # HttpStatus


def _index(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_INDEX


def _optional_index(value: object) -> bool:
    return value is None or (type(value) is int and 0 <= value <= MAX_INDEX)


def _optional_positive(value: object) -> bool:
    return value is None or (type(value) is int and 1 <= value <= MAX_INDEX)


def _text(value: object) -> bool:
    return type(value) is str and value != ""


def _cost(value: object) -> bool:
    # A comparison with NaN is false, and one bound each side refuses the infinities.
    return type(value) is float and 0.0 <= value <= MAX_COST_USD


def _usage(usage: Any) -> bool:
    if usage is None:
        return True
    if usage.keys() != _USAGE_KEYS:
        return False
    for name in ("input_tokens", "output_tokens", "total_tokens", "reasoning_tokens"):
        count = usage[name]
        if type(count) is not int or not 0 <= count <= MAX_TOKENS:
            return False
    return _cost(usage["total_cost"])


def _score(score: Any) -> bool:
    if score.keys() != _SCORE_KEYS:
        return False
    numeric = score["numeric"]
    if score["value"] not in ("C", "I", "S"):
        return False
    if numeric is not None and not (type(numeric) is float and 0.0 <= numeric <= 1.0):
        return False
    for name, value in score["metrics"].items():
        if type(name) is not str or type(value) is not float:
            return False
        if not -MAX_METRIC <= value <= MAX_METRIC:
            return False
    answer, trajectory = score["answer"], score["trajectory"]
    return (
        (answer is None or type(answer) is str)
        and type(score["explanation"]) is str
        and (trajectory is None or type(trajectory) is str)
    )


def _error(error: Any) -> bool:
    if error is None:
        return True
    if error.keys() != _ERROR_KEYS:
        return False
    status = error["http_status"]
    return (
        _text(error["kind"])
        and type(error["message"]) is str
        and (status is None or (type(status) is int and status in _HTTP_STATUS))
    )


def _fields(datum: dict[str, Any]) -> bool:
    """Every field's own type and bounds."""
    epochs, millis = datum["epochs"], datum["generation_time_ms"]
    spent = datum["spent_cost"]
    return (
        datum["format_version"] == 1
        and type(datum["format_version"]) is int
        and type(datum["run_id"]) is str
        and type(datum["benchmark_id"]) is str
        and type(datum["model"]) is str
        and is_run_key_part(datum["run_id"])
        and is_run_key_part(datum["benchmark_id"])
        and is_run_key_part(datum["model"])
        and _text(datum["sample_id"])
        and _index(datum["sample_index"])
        and _index(datum["epoch"])
        and datum["status"] in ("completed", "degraded")
        and type(datum["created_at_ms"]) is int
        and type(epochs) is int
        and 1 <= epochs <= MAX_INDEX
        and _optional_index(datum["dataset_size"])
        and _optional_positive(datum["selected_samples"])
        and _usage(datum["usage"])
        and (millis is None or (type(millis) is int and 0 <= millis <= MAX_MILLIS))
        and _optional_index(datum["attempts"])
        and (spent is None or _cost(spent))
        and (datum["config_fingerprint"] is None or _text(datum["config_fingerprint"]))
        and _score(datum["score"])
        and _error(datum["error"])
    )


def accepts(datum: dict[str, Any]) -> bool:
    """Whether FoldView accepts this datum (see `_accepts`)."""
    try:
        return datum.keys() == _KEYS and _accepts(datum)
    except (KeyError, TypeError, AttributeError):  # not a datum of the cut schema
        return False


def _accepts(datum: dict[str, Any]) -> bool:
    """Whether FoldView accepts this datum (its keys: FoldFields'), without building it.

    True only if FoldView's validation succeeds; False when it may not (the caller then lets
    FoldView decide, and report why). Proven against FoldView by tests/schemas/test_fold_fields.py.
    """
    if type(datum["usage"]) not in _RECORDS or type(datum["score"]) is not dict:
        return False
    if type(datum["error"]) not in _RECORDS or not _fields(datum):
        return False
    usage, spent = datum["usage"], datum["spent_cost"]
    kept = usage["total_cost"] if usage is not None else 0.0
    size, selected = datum["dataset_size"], datum["selected_samples"]
    return (
        datum["epoch"] < datum["epochs"]
        and (size is None or datum["sample_index"] < size)
        and (size is None or selected is None or selected <= size)
        and (datum["status"] == "degraded") == (datum["error"] is not None)
        and (spent is None or spent >= kept)
    )


_KEYS: Final = frozenset(FoldFields.__annotations__)
_USAGE_KEYS: Final = frozenset(UsageFields.__annotations__)
_SCORE_KEYS: Final = frozenset(ScoreFields.__annotations__)
_ERROR_KEYS: Final = frozenset({"kind", "message", "http_status"})
_RECORDS: Final = (dict, type(None))
