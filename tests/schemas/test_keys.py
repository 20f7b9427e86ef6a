"""Kafka keys, run key prefixes and partitions."""

from __future__ import annotations

import hashlib
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resultlog.schemas import (
    InvalidRunKeyError,
    KeyDecodeError,
    Location,
    RunKey,
    decode_key,
    decode_run_key,
    encode_key,
    encode_run_key,
    partition_for,
    run_key_prefix,
)
from tests.support.strategies import MAX_LONG, run_keys

KEY = RunKey("run-1", "arith", "openai/gpt-4o")


def test_key_layout_percent_encodes_each_text_part() -> None:
    assert encode_key(KEY, 12, 0) == b"run-1/arith/openai%2Fgpt-4o/12/0"
    assert encode_run_key(KEY) == b"run-1/arith/openai%2Fgpt-4o"
    assert run_key_prefix(KEY) == b"run-1/arith/openai%2Fgpt-4o/"


def test_rfc3986_unreserved_bytes_stay_and_everything_else_is_escaped() -> None:
    key = RunKey("A-z.0_9~", "a b/c%d", "é+?#")
    assert encode_run_key(key) == b"A-z.0_9~/a%20b%2Fc%25d/%C3%A9%2B%3F%23"
    assert quote("~", safe="") == "~"


@given(run_keys, st.integers(0, MAX_LONG), st.integers(0, MAX_LONG))
def test_keys_round_trip_and_share_the_run_prefix(key: RunKey, index: int, epoch: int) -> None:
    raw = encode_key(key, index, epoch)
    assert decode_key(raw) == (key, index, epoch)
    assert raw.startswith(run_key_prefix(key))
    assert raw.count(b"/") == 4
    assert decode_run_key(encode_run_key(key)) == key


@given(run_keys, run_keys)
def test_a_run_prefix_never_matches_another_runs_keys(a: RunKey, b: RunKey) -> None:
    if a != b:
        assert not encode_key(b, 0, 0).startswith(run_key_prefix(a))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"run/arith/model/1", "4 '/'-separated parts, expected 5"),
        (b"run/arith/model/1/0/9", "6 '/'-separated parts"),
        (b"run/arith/model/x/0", "sample_index 'x' is not a non-negative decimal integer"),
        (b"run/arith/model/1/-1", "epoch '-1' is not"),
        (b"run/arith/model/01/0", "sample_index '01' is not"),
        (b"run/arith/model/+1/0", "sample_index '+1' is not"),
        (b"run/arith/model/9223372036854775808/0", "does not fit a long"),
        (b"run//model/1/0", "benchmark_id '' is empty or has a bad percent-escape"),
        (b"run/ari%zzth/model/1/0", "bad percent-escape"),
        (b"run/arith/model%2/1/0", "bad percent-escape"),
        (b"run/arith/mod el/1/0", "bad percent-escape"),
        (b"run/arith/%FF/1/0", "is not percent-encoded UTF-8"),
        (b"run/arith/%41/1/0", "is not canonically percent-encoded"),
        (b"run/arith/a%2fb/1/0", "bad percent-escape"),
        (b"run/\xc3\xa9/model/1/0", "non-ASCII"),
    ],
)
def test_malformed_keys_raise_key_decode_error(raw: bytes, reason: str) -> None:
    with pytest.raises(KeyDecodeError) as info:
        decode_key(raw)
    assert reason in info.value.reason
    assert info.value.raw == raw


def test_run_key_decoding_needs_exactly_three_parts() -> None:
    with pytest.raises(KeyDecodeError, match="expected 3"):
        decode_run_key(encode_key(KEY, 0, 0))


def test_key_decode_error_is_a_decode_error_and_can_be_located() -> None:
    with pytest.raises(KeyDecodeError) as info:
        decode_key(b"nope")
    located = info.value.at(Location("resultlog.sample-results", 3, 99))
    assert isinstance(located, KeyDecodeError)
    assert "resultlog.sample-results[3]@99" in str(located)


@pytest.mark.parametrize(("index", "epoch"), [(-1, 0), (0, -1), (True, 0), (2**63, 0)])
def test_encode_key_refuses_bad_indexes(index: int, epoch: int) -> None:
    with pytest.raises((TypeError, ValueError)):
        encode_key(KEY, index, epoch)


@pytest.mark.parametrize(
    "parts", [("", "b", "m"), ("r", "", "m"), ("r", "b", ""), ("r", "b", "\ud800"), ("r", 1, "m")]
)
def test_run_key_parts_must_be_nonempty_utf8_strings(parts: tuple[object, ...]) -> None:
    with pytest.raises(InvalidRunKeyError):
        RunKey(*parts)  # type: ignore[arg-type]  # deliberately ill-typed: the check at run time is under test


def test_run_key_is_hashable_and_ordered() -> None:
    assert len({KEY, RunKey("run-1", "arith", "openai/gpt-4o")}) == 1
    assert sorted([RunKey("b", "x", "y"), RunKey("a", "x", "y")])[0].run_id == "a"


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (KEY, [0, 0, 0, 28, 308]),
        (RunKey("r", "b", "m"), [0, 2, 2, 2, 658]),
        (RunKey("wf-2f6c1d9e", "arith", "anthropic/claude-3.5"), [0, 3, 9, 17, 121]),
        (RunKey("é", "b c", "x/y"), [0, 0, 6, 2, 738]),
    ],
)
def test_partition_for_is_pinned(key: RunKey, expected: list[int]) -> None:
    # These values are the wire contract: changing them strands every run's records.
    assert [partition_for(key, n) for n in (1, 6, 12, 32, 1000)] == expected


def test_partition_for_is_blake2b_of_the_encoded_run_key() -> None:
    digest = hashlib.blake2b(b"run-1/arith/openai%2Fgpt-4o", digest_size=8).digest()
    assert partition_for(KEY, 1000) == int.from_bytes(digest, "big") % 1000


@given(run_keys, st.integers(1, 1024))
def test_partition_for_is_in_range_and_depends_only_on_the_run_key(
    key: RunKey, partitions: int
) -> None:
    value = partition_for(key, partitions)
    assert 0 <= value < partitions
    assert value == partition_for(RunKey(key.run_id, key.benchmark_id, key.model), partitions)


@pytest.mark.parametrize("partitions", [0, -3])
def test_partition_for_needs_a_positive_count(partitions: int) -> None:
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for(KEY, partitions)
