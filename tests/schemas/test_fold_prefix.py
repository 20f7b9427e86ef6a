"""The hand-written prefix reader gives fastavro's datum of a v2 or v3 value, or leaves the
bytes to fastavro."""

from __future__ import annotations

from io import BytesIO
from typing import Any

import pytest
from fastavro import schemaless_reader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resultlog.schemas import Codec, SampleResult, shipped_catalog
from resultlog.schemas._catalog import SAMPLE_RESULT
from resultlog.schemas._prefix import read_fold_prefix
from resultlog.schemas._view import FOLD_FIELDS, ViewPlans
from tests.support.framings import V2, v2_value
from tests.support.strategies import sample_results

V3 = shipped_catalog().get(SAMPLE_RESULT, 3)
PLANS = ViewPlans(V3)
START = 10  # after the single-object header
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


def _exact(datum: dict[str, Any] | None) -> str:
    """The datum's fields by name, floats exact (NaN too); a v2 writer's default comes last
    in fastavro's datum, so the order of the top level is not compared."""
    return repr(sorted(datum.items())) if datum is not None else "None"


def _agrees(raw: bytes, version: str) -> None:
    ours = read_fold_prefix(raw, START, v3=version == "v3")
    if ours is None:
        return  # fastavro decides
    theirs = _fastavro(raw, version)
    assert theirs is not None, raw.hex()
    assert _exact(ours) == _exact(theirs)


def test_the_reader_reads_v3_fields_in_order() -> None:
    assert tuple(f["name"] for f in PLANS.reader["fields"]) == FOLD_FIELDS


@pytest.mark.parametrize("version", sorted(VERSIONS))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=sample_results())
def test_a_valid_record_reads_as_fastavro_reads_it(version: str, record: SampleResult) -> None:
    raw = VERSIONS[version][1](record)
    ours = read_fold_prefix(raw, START, v3=version == "v3")
    assert ours is not None
    assert _exact(ours) == _exact(_fastavro(raw, version))


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
