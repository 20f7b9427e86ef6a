"""Kafka keys and partitions: how a record or run key is laid out in bytes."""

from __future__ import annotations

import functools
import hashlib
import re
from typing import NamedTuple
from urllib.parse import quote, unquote_to_bytes

from resultlog.schemas.errors import KeyDecodeError
from resultlog.schemas.runkey import InvalidRunKeyError, RunKey

_SEP = "/"
_MAX_LONG = 2**63 - 1
# A canonical part: only RFC 3986 unreserved bytes and upper-case %XX escapes.
_PART = re.compile(r"(?:[A-Za-z0-9\-._~]|%[0-9A-F]{2})+")
_INDEX = re.compile(r"0|[1-9][0-9]*")


class RecordId(NamedTuple):
    """What a sample-results key names: one (sample, epoch) of one run key."""

    run_key: RunKey
    sample_index: int
    epoch: int


def _quote(part: str) -> str:
    """Percent-encode every byte of the UTF-8 part except RFC 3986 unreserved ones."""
    return quote(part, safe="")


def encode_run_key(run_key: RunKey) -> bytes:
    """The run-summaries topic key: `run_id/benchmark_id/model`, each part percent-encoded."""
    parts = (run_key.run_id, run_key.benchmark_id, run_key.model)
    return _SEP.join(map(_quote, parts)).encode("ascii")


@functools.lru_cache(maxsize=4096)
def run_key_prefix(run_key: RunKey) -> bytes:
    """The byte prefix shared by every sample-results key of this run key (ends in `/`)."""
    return encode_run_key(run_key) + b"/"


def encode_key(run_key: RunKey, sample_index: int, epoch: int) -> bytes:
    """The sample-results topic key: `run_id/benchmark_id/model/sample_index/epoch`."""
    _check_index("sample_index", sample_index)
    _check_index("epoch", epoch)
    return run_key_prefix(run_key) + indexes_part(sample_index, epoch)


# Cached: every reader checks each record's key against it, and runs share their indexes.
@functools.lru_cache(maxsize=1 << 16)
def indexes_part(sample_index: int, epoch: int) -> bytes:
    """A sample-results key's last two parts, `sample_index/epoch`, as `decode_key` reads them."""
    return b"%d/%d" % (sample_index, epoch)


def decode_key(raw: bytes) -> RecordId:
    """Parse a sample-results key into (run key, sample_index, epoch)."""
    # The hot path: a run key prefix already decoded, then two short canonical indexes.
    if type(raw) is bytes:
        end = raw.rfind(b"/")
        middle = raw.rfind(b"/", 0, end)
        run_key = _run_keys.get(raw[:middle])
        if run_key is not None:
            index, epoch = raw[middle + 1 : end], raw[end + 1 :]
            if _short_index(index) and _short_index(epoch):
                return RecordId(run_key, int(index), int(epoch))
    return _decode_key(raw)


def _short_index(part: bytes) -> bool:
    """Whether `part` is a canonical decimal index below 10**18 (so it fits a long)."""
    return part.isdigit() and len(part) < 19 and (part[0] != 48 or len(part) == 1)


# Prefixes (`run_id/benchmark_id/model`, as bytes) of keys decoded in full, and their run key.
_run_keys: dict[bytes, RunKey] = {}
_RUN_KEYS_HELD = 4096


def _decode_key(raw: bytes) -> RecordId:
    """`decode_key` in full: every check, every error."""
    parts = _split(raw, 5)
    prefix = _SEP.join(parts[:3])
    try:
        # Keys of one run share their first three parts: decode those once.
        run_key = _cached_run_key(prefix)
    except KeyDecodeError as exc:
        raise KeyDecodeError(exc.reason, bytes(raw)) from exc.__cause__
    record_id = RecordId(
        run_key, _index(raw, "sample_index", parts[3]), _index(raw, "epoch", parts[4])
    )
    if len(_run_keys) >= _RUN_KEYS_HELD:
        _run_keys.clear()
    _run_keys[prefix.encode("ascii")] = run_key
    return record_id


@functools.lru_cache(maxsize=4096)
def _cached_run_key(text: str) -> RunKey:
    """The run key of a key's first three parts (errors are not cached)."""
    return _run_key(text.encode("ascii"), text.split(_SEP))


def decode_run_key(raw: bytes) -> RunKey:
    """Parse a run-summaries key into its run key."""
    return _run_key(raw, _split(raw, 3))


# typed: partition_for(k, True) must still be refused after partition_for(k, 1) was cached.
@functools.lru_cache(maxsize=4096, typed=True)
def partition_for(run_key: RunKey, num_partitions: int) -> int:
    """The partition of every record of this run key: stable across processes and versions."""
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, int):
        raise TypeError("num_partitions must be an int")
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    digest = hashlib.blake2b(encode_run_key(run_key), digest_size=8).digest()
    return int.from_bytes(digest, "big") % num_partitions


def _check_index(name: str, value: int) -> None:
    """Reject an index that is not a non-negative Avro long."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 0 <= value <= _MAX_LONG:
        raise ValueError(f"{name} must be in [0, 2**63), got {value}")


def _split(raw: bytes, count: int) -> list[str]:
    """Split an ASCII key into exactly `count` parts."""
    if not isinstance(raw, bytes | bytearray | memoryview):
        raise KeyDecodeError(f"key must be bytes, got {type(raw).__name__}", None)
    raw = bytes(raw)
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise KeyDecodeError("key has non-ASCII bytes (not percent-encoded)", raw) from None
    parts = text.split(_SEP)
    if len(parts) != count:
        raise KeyDecodeError(f"key has {len(parts)} '/'-separated parts, expected {count}", raw)
    return parts


def _run_key(raw: bytes, parts: list[str]) -> RunKey:
    """Decode the three percent-encoded run key parts."""
    names = ("run_id", "benchmark_id", "model")
    values = [_unquote(raw, name, part) for name, part in zip(names, parts, strict=True)]
    try:
        return RunKey(*values)
    except InvalidRunKeyError as exc:
        raise KeyDecodeError(str(exc), raw) from exc


def _unquote(raw: bytes, name: str, part: str) -> str:
    """Strictly decode one part; only the canonical encoding of a UTF-8 string is accepted."""
    if not _PART.fullmatch(part):
        raise KeyDecodeError(f"{name} {part!r} is empty or has a bad percent-escape", raw)
    try:
        value = unquote_to_bytes(part).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KeyDecodeError(f"{name} {part!r} is not percent-encoded UTF-8", raw) from exc
    # Non-canonical spellings (e.g. %41 for A) would be a second key for the same record.
    if _quote(value) != part:
        raise KeyDecodeError(f"{name} {part!r} is not canonically percent-encoded", raw)
    return value


def _index(raw: bytes, name: str, part: str) -> int:
    """Decode a canonical non-negative decimal integer part."""
    if not _INDEX.fullmatch(part):
        raise KeyDecodeError(f"{name} {part!r} is not a non-negative decimal integer", raw)
    value = int(part)
    if value > _MAX_LONG:
        raise KeyDecodeError(f"{name} {part} does not fit a long", raw)
    return value
