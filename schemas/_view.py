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
from typing import Any, Final

import fastavro

from resultlog.schemas._catalog import SchemaVersion
from resultlog.schemas._limits import FIRST_MS, LAST_MS
from resultlog.schemas.models import RecordHead

__all__ = ["FOLD_FIELDS", "FoldView", "ViewPlan", "ViewPlans", "millis_error"]


def millis_error(datum: dict[str, Any]) -> str | None:
    """Why the datum's `created_at` (milliseconds) is no datetime, if it is not one."""
    millis = datum["created_at"]
    if type(millis) is int and FIRST_MS <= millis <= LAST_MS:
        return None
    return f"created_at {millis!r} ms is not a datetime (year 1 to 9999)"


class FoldView(RecordHead[int]):
    """The fields of a SampleResult the fold reads, validated as a SampleResult validates them.

    Read by `Codec.decode_fold_view`. `created_at` is the record's as the wire holds it
    (milliseconds since the epoch), `created_at_ms` too. What follows `error` in the record
    is neither read nor validated: `Codec.decode_sample_result` gives the whole record.
    """

    @property
    def created_at_ms(self) -> int:
        """`created_at`: milliseconds since the epoch (as SampleResult.created_at_ms names it)."""
        return self.created_at


FOLD_FIELDS: Final = tuple(FoldView.model_fields)
"""The SampleResult fields a fold view holds, in schema v3's order (its first 19 fields).

`error` is not folded, but reading it (one null byte in a completed record) keeps the rule
"error is set exactly when status is degraded" checked.
"""


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
