"""The hand-written v2 prefix reader gives fastavro's datum, or leaves the bytes to fastavro."""

from __future__ import annotations

from io import BytesIO
from typing import Any

from fastavro import schemaless_reader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resultlog.schemas import Codec, SampleResult
from resultlog.schemas._prefix import read_v2_prefix
from resultlog.schemas._view import FOLD_FIELDS, ViewPlans
from tests.support.framings import V2
from tests.support.strategies import sample_results

CUT = ViewPlans(V2).reader
START = 10  # after the single-object header


def _fastavro(raw: bytes) -> dict[str, Any] | None:
    """fastavro's read of the cut schema, None where it fails."""
    buf = BytesIO(raw)
    buf.seek(START)
    try:
        datum = schemaless_reader(buf, CUT, None)
    except Exception:  # any failure: the prefix reader must not answer either
        return None
    assert isinstance(datum, dict)
    return datum


def _agrees(raw: bytes) -> None:
    ours = read_v2_prefix(raw, START)
    if ours is None:
        return  # fastavro decides
    theirs = _fastavro(raw)
    assert theirs is not None, raw.hex()
    assert repr(ours) == repr(theirs)  # exact floats, NaN too, and the same key order


def test_the_reader_reads_v2_fields_in_order() -> None:
    assert tuple(f["name"] for f in CUT["fields"]) == FOLD_FIELDS


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=sample_results())
def test_a_valid_record_reads_as_fastavro_reads_it(record: SampleResult) -> None:
    raw = Codec().encode_sample_result(record)
    ours = read_v2_prefix(raw, START)
    assert ours is not None
    assert repr(ours) == repr(_fastavro(raw))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    record=sample_results(),
    edits=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.none() | st.integers(START, 400),
)
def test_mutated_bytes_read_as_fastavro_reads_them_or_not_at_all(
    record: SampleResult, edits: list[tuple[int, int]], cut: int | None
) -> None:
    raw = bytearray(Codec().encode_sample_result(record))
    for where, byte in edits:
        raw[START + where % (len(raw) - START)] = byte
    _agrees(bytes(raw if cut is None else raw[:cut]))


@settings(max_examples=500, deadline=None)
@given(body=st.binary(max_size=200))
def test_random_bytes_read_as_fastavro_reads_them_or_not_at_all(body: bytes) -> None:
    _agrees(bytes(START) + body)
