"""The hand-written prefix reader gives fastavro's datum of a v2 or v3 value, or leaves the
bytes to fastavro; its check accepts exactly what FoldView accepts of that datum. Valid,
mutated and random bytes, on whichever fold path runs (tests/resultlog/test_fold_path.py runs
them on the twins too)."""

from __future__ import annotations

from io import BytesIO
from typing import Any

import pytest
from fastavro import schemaless_reader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from resultlog.schemas import (
    TRUSTED_JSON,
    Codec,
    FoldPrefix,
    FoldView,
    SampleResult,
    shipped_catalog,
)
from resultlog.schemas._catalog import SAMPLE_RESULT
from resultlog.schemas._limits import FIRST_MS, LAST_MS
from resultlog.schemas._prefix import read_prefix
from resultlog.schemas._view import FOLD_FIELDS, ViewPlans
from resultlog.schemas.runkey import is_run_key_part
from tests.support.framings import V2, v2_value
from tests.support.strategies import sample_results

V3 = shipped_catalog().get(SAMPLE_RESULT, 3)
PLANS = ViewPlans(V3)
START = 10  # after the single-object header
ERROR_FIELDS = ("kind", "message", "http_status")
VERSIONS = {
    "v3": (PLANS.plan(V3), Codec().encode_sample_result),
    "v2": (PLANS.plan(V2), lambda record: v2_value(record.model_dump())),
}


def _fastavro(raw: bytes, version: str) -> dict[str, Any] | None:
    """fastavro's read of the cut schema, None where it fails."""
    buf = BytesIO(raw)
    buf.seek(START)
    try:
        datum = schemaless_reader(buf, *VERSIONS[version][0])
    except Exception:  # any failure: the prefix reader must not answer either
        return None
    assert isinstance(datum, dict)
    return datum


def datum_of(prefix: FoldPrefix) -> dict[str, Any]:
    """The prefix's fields as fastavro reads them into v3's cut schema (`created_at` a long)."""
    usage = None
    if prefix.has_usage:
        usage = {
            "input_tokens": prefix.input_tokens,
            "output_tokens": prefix.output_tokens,
            "total_tokens": prefix.total_tokens,
            "reasoning_tokens": prefix.reasoning_tokens,
            "total_cost": prefix.total_cost,
        }
    score = {
        "value": prefix.value,
        "numeric": prefix.numeric,
        "metrics": dict(prefix.metrics.items),
        "answer": prefix.answer,
        "explanation": prefix.explanation,
        "trajectory": prefix.trajectory,
    }
    error = prefix.error
    names = [name for name in FOLD_FIELDS if name not in ("status", "usage", "score", "error")]
    return {
        name: getattr(prefix, name if name != "created_at" else "created_at_ms") for name in names
    } | {
        "status": "degraded" if prefix.degraded else "completed",
        "usage": usage,
        "score": score,
        "error": None
        if error is None
        else dict(zip(("kind", "message", "http_status"), error, strict=True)),
    }


def acceptable(prefix: FoldPrefix) -> bool:
    """The prefix's check, with the run key parts' that the caller makes."""
    parts = (prefix.run_id, prefix.benchmark_id, prefix.model)
    return prefix.acceptable() and all(map(is_run_key_part, parts))


def pydantic_accepts(datum: dict[str, Any]) -> bool:
    """Whether FoldView validates a datum of the cut schema (`created_at` a long), and the
    datetime range the full decode reads `created_at` into holds it."""
    millis = datum["created_at"]
    try:
        FoldView.model_validate(datum, context=TRUSTED_JSON)
    except ValidationError:
        return False
    return bool(FIRST_MS <= millis <= LAST_MS)


def _exact(datum: dict[str, Any] | None) -> str:
    """The datum's fields by name, floats exact (NaN too); a v2 writer's default comes last
    in fastavro's datum, so the order of the top level is not compared."""
    return repr(sorted(datum.items())) if datum is not None else "None"


def _agrees(raw: bytes, version: str) -> None:
    prefix = read_prefix(raw, START, version == "v3")
    if prefix is None:
        return  # fastavro decides
    theirs = _fastavro(raw, version)
    assert theirs is not None, raw.hex()
    assert _exact(datum_of(prefix)) == _exact(theirs)
    assert acceptable(prefix) == pydantic_accepts(theirs), raw.hex()


def test_the_reader_reads_v3_fields_in_order() -> None:
    assert tuple(f["name"] for f in PLANS.reader["fields"]) == FOLD_FIELDS


@pytest.mark.parametrize("version", sorted(VERSIONS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=sample_results())
def test_a_valid_record_reads_as_fastavro_reads_it(version: str, record: SampleResult) -> None:
    raw = VERSIONS[version][1](record)
    prefix = read_prefix(raw, START, version == "v3")
    assert prefix is not None and acceptable(prefix)
    _agrees(raw, version)


@pytest.mark.parametrize("version", sorted(VERSIONS))
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    record=sample_results(),
    edits=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.none() | st.integers(START, 400),
)
def test_mutated_bytes_read_as_fastavro_reads_them_or_not_at_all(
    version: str, record: SampleResult, edits: list[tuple[int, int]], cut: int | None
) -> None:
    raw = bytearray(VERSIONS[version][1](record))
    for where, byte in edits:
        raw[START + where % (len(raw) - START)] = byte
    _agrees(bytes(raw if cut is None else raw[:cut]), version)


@pytest.mark.parametrize("version", sorted(VERSIONS))
@settings(max_examples=400, deadline=None)
@given(body=st.binary(max_size=200))
def test_random_bytes_read_as_fastavro_reads_them_or_not_at_all(version: str, body: bytes) -> None:
    _agrees(bytes(START) + body, version)
