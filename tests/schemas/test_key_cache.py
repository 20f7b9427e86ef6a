"""decode_key's hot path (a run key prefix decoded before) answers exactly as the full parse."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resultlog.schemas import KeyDecodeError, RecordId, RunKey, decode_key, encode_key
from resultlog.schemas.keys import _decode_key
from tests.support.strategies import run_key_parts

PARTS = st.sampled_from(["run", "a%2Fb", "é", "x y"]) | run_key_parts.filter(lambda p: len(p) <= 4)
INDEXES = st.sampled_from([b"0", b"00", b"01", b"7", b"", b"-1", b"1e3", b"\xd9\xa3"]) | st.binary(
    max_size=3
)
LONGS = st.integers(min_value=0, max_value=2**63 - 1).map(lambda n: str(n).encode())


def _parse(raw: bytes) -> RecordId | str:
    try:
        return _decode_key(raw)
    except KeyDecodeError as exc:
        return f"{exc.reason} {exc.raw!r}"


def _hot(raw: bytes) -> RecordId | str:
    try:
        return decode_key(raw)
    except KeyDecodeError as exc:
        return f"{exc.reason} {exc.raw!r}"


@settings(max_examples=1000, deadline=None)
@given(
    run_id=PARTS,
    benchmark_id=PARTS,
    model=PARTS,
    index=INDEXES | LONGS,
    epoch=INDEXES | LONGS,
    tail=st.sampled_from([b"", b"/", b"/0", b"x"]),
)
def test_the_hot_path_agrees_with_the_full_parse(
    run_id: str, benchmark_id: str, model: str, index: bytes, epoch: bytes, tail: bytes
) -> None:
    known = encode_key(RunKey(run_id, benchmark_id, model), 1, 2)
    assert decode_key(known) == _decode_key(known)  # the prefix is now cached
    prefix = known.rsplit(b"/", 2)[0]
    raw = prefix + b"/" + index + b"/" + epoch + tail
    assert _hot(raw) == _parse(raw)
    assert _hot(prefix + b"/" + index) == _parse(prefix + b"/" + index)


@pytest.mark.parametrize("raw", [b"a/b/c/1/2", bytearray(b"a/b/c/1/2"), memoryview(b"a/b/c/1/2")])
def test_any_bytes_like_key_decodes_the_same(raw: bytes) -> None:
    assert decode_key(raw) == RecordId(RunKey("a", "b", "c"), 1, 2)
