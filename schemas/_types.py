"""Constrained field types and the frozen base model shared by every record model."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Annotated, Final

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationInfo,
)

from resultlog.schemas._limits import (
    MAX_COST_USD,
    MAX_HTTP_STATUS,
    MAX_INDEX,
    MAX_METRIC,
    MAX_MILLIS,
    MAX_TOKENS,
    MIN_HTTP_STATUS,
)
from resultlog.schemas.runkey import check_run_key_part

_MAX_LONG = 2**63 - 1


TRUSTED_JSON: Final[Mapping[str, bool]] = MappingProxyType({"trusted_json": True})
"""Validation context of the decoder: JSON-text fields are opaque Avro strings there.

Their well-formedness is checked where a record is built; re-parsing every blob on every
decode would make decoding cost grow with the size of trajectories and metadata.
"""


class Frozen(BaseModel):
    """Immutable model that rejects unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _json_text(value: str, info: ValidationInfo) -> str:
    """Accept only well-formed JSON text (checked where records are built, see TRUSTED_JSON)."""
    if info.context is TRUSTED_JSON:
        return value
    try:
        json.loads(value)
    except ValueError as exc:
        raise ValueError(f"must be JSON text: {exc}") from exc
    return value


def _run_key_part(value: str, info: ValidationInfo) -> str:
    """Refuse what no reader can handle as a run key part (checked on decode too)."""
    return check_run_key_part(value, info.field_name or "part")


def _utc_millis(value: datetime) -> datetime:
    """Normalise to UTC and truncate to whole milliseconds, the wire precision."""
    if value.tzinfo is UTC and not value.microsecond % 1000:
        return value
    value = value.astimezone(UTC)
    return value.replace(microsecond=value.microsecond // 1000 * 1000)


Count = Annotated[int, Strict(), Field(ge=0, le=_MAX_LONG)]
"""A non-negative Avro long; bools and numeric strings are refused."""


Index = Annotated[int, Strict(), Field(ge=0, le=MAX_INDEX)]
"""A sample index, epoch, dataset size, chunk index or attempt count."""

PositiveIndex = Annotated[int, Strict(), Field(ge=1, le=MAX_INDEX)]
Tokens = Annotated[int, Strict(), Field(ge=0, le=MAX_TOKENS)]
Millis = Annotated[int, Strict(), Field(ge=0, le=MAX_MILLIS)]
Cost = Annotated[float, Field(ge=0.0, le=MAX_COST_USD, allow_inf_nan=False)]
"""US dollars of one record."""

MetricValue = Annotated[float, Field(ge=-MAX_METRIC, le=MAX_METRIC, allow_inf_nan=False)]
UnitInterval = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
HttpStatus = Annotated[int, Strict(), Field(ge=MIN_HTTP_STATUS, le=MAX_HTTP_STATUS)]
NonEmptyStr = Annotated[str, Field(min_length=1)]
RunKeyPart = Annotated[str, Field(min_length=1), AfterValidator(_run_key_part)]
"""run_id, benchmark_id or model: the refusals of `RunKey`, for every model that carries one."""
JsonText = Annotated[str, AfterValidator(_json_text)]
"""Free-form content carried as JSON text (Avro string)."""

Real = Annotated[float, Field(allow_inf_nan=False)]
NonNegativeReal = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Timestamp = Annotated[AwareDatetime, AfterValidator(_utc_millis)]
"""A timezone-aware instant, normalised to UTC with millisecond precision."""

Metrics = dict[str, Real]
RecordMetrics = dict[str, MetricValue]

__all__ = [
    "TRUSTED_JSON",
    "Cost",
    "Count",
    "Frozen",
    "HttpStatus",
    "Index",
    "JsonText",
    "MetricValue",
    "Metrics",
    "Millis",
    "NonEmptyStr",
    "NonNegativeReal",
    "PositiveIndex",
    "Real",
    "RecordMetrics",
    "RunKeyPart",
    "Timestamp",
    "Tokens",
    "UnitInterval",
]
