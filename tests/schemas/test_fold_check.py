"""The fold prefix's check accepts exactly what FoldView accepts, and both give one contribution."""

from __future__ import annotations

import math
from io import BytesIO
from typing import Any

from fastavro import schemaless_writer
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from resultlog.consumers._decode import decode_contribution
from resultlog.consumers.fold import Contribution
from resultlog.schemas import (
    MAX_COST_USD,
    MAX_INDEX,
    MAX_METRIC,
    MAX_MILLIS,
    MAX_TOKENS,
    TRUSTED_JSON,
    Codec,
    FoldView,
    SampleResult,
    decode_key,
    shipped_catalog,
)
from resultlog.schemas._limits import FIRST_MS, LAST_MS
from resultlog.schemas._prefix import read_prefix
from resultlog.schemas._view import ViewPlans
from resultlog.schemas.errors import Location
from resultlog.schemas.runkey import is_run_key_part
from tests.schemas.test_fold_view import VECTORS
from tests.support.framings import framings
from tests.support.strategies import sample_results


def _near(*bounds: int) -> st.SearchStrategy[int]:
    """Integers at and around each bound (and a few anywhere)."""
    near = [b + d for b in bounds for d in (-1, 0, 1)]
    return st.sampled_from(near) | st.integers(min_value=-(2**63), max_value=2**63 - 1)


def _reals(*bounds: float) -> st.SearchStrategy[float]:
    """Floats at and around each bound, the specials, and a few anywhere."""
    near = [
        x for b in bounds for x in (math.nextafter(b, -math.inf), b, math.nextafter(b, math.inf))
    ]
    specials = [math.nan, math.inf, -math.inf, -0.0, 0.0]
    return st.sampled_from(near + specials) | st.floats(allow_nan=True, allow_infinity=True)


CUT_V3 = ViewPlans(shipped_catalog().get("resultlog.SampleResult", 3)).reader
INDEX = _near(0, MAX_INDEX)
TEXT = st.sampled_from(["", "a", "é"]) | st.text(max_size=3)
COST = _reals(0.0, 1e-9, MAX_COST_USD)


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


USAGE = st.fixed_dictionaries(
    {
        "input_tokens": _near(0, MAX_TOKENS),
        "output_tokens": _near(0, MAX_TOKENS),
        "total_tokens": _near(0, MAX_TOKENS),
        "reasoning_tokens": _near(0, MAX_TOKENS),
        "total_cost": COST,
    }
)
SCORE = st.fixed_dictionaries(
    {
        "value": st.sampled_from(["C", "I", "S"]),
        "numeric": _maybe(_reals(0.0, 1.0)),
        "metrics": st.dictionaries(TEXT, _reals(-MAX_METRIC, MAX_METRIC), max_size=3),
        "answer": _maybe(TEXT),
        "explanation": TEXT,
        "trajectory": _maybe(TEXT),
    }
)
ERROR = st.fixed_dictionaries(
    {"kind": TEXT, "message": TEXT, "http_status": _maybe(_near(100, 599))}
)
DATUMS = st.fixed_dictionaries(
    {
        "format_version": st.sampled_from([1, 1, 1, 0, 2]),
        "run_id": TEXT,
        "benchmark_id": TEXT,
        "model": TEXT,
        "sample_index": INDEX,
        "epoch": INDEX | st.integers(0, 4),
        "sample_id": TEXT,
        "status": st.sampled_from(["completed", "degraded"]),
        "epochs": _near(1, MAX_INDEX) | st.integers(0, 4),
        "dataset_size": _maybe(INDEX),
        "selected_samples": _maybe(INDEX | st.integers(0, 4)),
        "usage": _maybe(USAGE),
        "generation_time_ms": _maybe(_near(0, MAX_MILLIS)),
        "attempts": _maybe(INDEX),
        "spent_cost": _maybe(COST),
        "config_fingerprint": _maybe(TEXT),
        "score": SCORE,
        "error": _maybe(ERROR),
        "created_at": st.integers(-(2**40), 2**40),
    }
)


def _pydantic_accepts(datum: dict[str, Any]) -> bool:
    try:
        FoldView.model_validate(datum, context=TRUSTED_JSON)
    except ValidationError:
        return False
    return True


def _cut_v3_body(datum: dict[str, Any]) -> bytes | None:
    """The datum written with v3's cut schema (created_at a plain long): a fold prefix's bytes;
    None for a value its Avro type cannot hold (an int field past 32 bits)."""
    body = BytesIO()
    try:
        schemaless_writer(body, CUT_V3, datum)
    except ValueError:
        return None
    return body.getvalue()


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(datum=DATUMS)
def test_the_prefix_check_accepts_exactly_what_the_fold_view_model_accepts(
    datum: dict[str, Any],
) -> None:
    raw = _cut_v3_body(datum)
    assume(raw is not None)
    assert raw is not None
    prefix = read_prefix(raw, 0, True)
    assume(prefix is not None)  # a varint over 9 bytes: left to fastavro
    assert prefix is not None
    parts = (prefix.run_id, prefix.benchmark_id, prefix.model)
    ours = prefix.acceptable() and all(map(is_run_key_part, parts))
    assert ours == (_pydantic_accepts(datum) and FIRST_MS <= datum["created_at"] <= LAST_MS)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=sample_results())
def test_the_prefix_gives_the_contribution_of_the_view(record: SampleResult) -> None:
    codec = Codec()
    raw = codec.encode_sample_result(record)
    prefix = codec.fold_prefix(raw)
    assert prefix is not None and prefix.acceptable()
    assert Contribution.of_prefix(prefix) == Contribution.of(codec.decode_fold_view(raw))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=sample_results())
def test_every_framing_gives_the_contribution_of_the_view(record: SampleResult) -> None:
    key = decode_key(record.key)
    for name, (codec, raw) in framings(record).items():
        full = Contribution.of(codec.decode_sample_result(raw))
        assert Contribution.of(codec.decode_fold_view(raw)) == full, name
        assert decode_contribution(codec, key, raw, Location()) == full, name


def test_every_golden_vector_gives_the_contribution_of_its_full_decode() -> None:
    codec = Codec()
    for vector in VECTORS["records"]:
        raw = bytes.fromhex(vector["single_object_hex"])
        record = codec.decode_sample_result(raw)
        contribution = decode_contribution(codec, decode_key(record.key), raw, Location())
        assert contribution == Contribution.of(record), vector["name"]
