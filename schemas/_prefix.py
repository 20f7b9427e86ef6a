"""A hand-written reader of schema v2's and v3's fold prefix: fastavro's datum, in 2/3 the time.

fastavro's generic reader walks the schema for every value; the fold prefix is fixed, so this
reads it straight from the bytes. It answers only when its answer is certainly fastavro's:
bytes it is not sure of (a varint over 9 bytes, a union or enum index not in its canonical
one-byte form, a negative map block count, a length past the end, bad UTF-8) make it return
None, and the caller reads the value with fastavro, which decides. Checked against fastavro
on random and mutated records (tests/schemas/test_fold_prefix.py).
"""

from __future__ import annotations

import struct
from typing import Any, Final

__all__ = ["read_fold_prefix"]

_DOUBLE = struct.Struct("<d").unpack_from
_MAX_VARINT = 9  # up to 63 bits: fastavro's 64-bit arithmetic and Python's ints agree
# Canonical one-byte zig-zag encodings of an enum or union index.
_STATUS: Final = {0: "completed", 2: "degraded"}
_SCORE_VALUE: Final = {0: "C", 2: "I", 4: "S"}
_NULL, _SET = 0, 2


class _UnsureError(Exception):
    """Bytes this reader leaves to fastavro."""


def _long(raw: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint at `pos`, and the position after it."""
    byte = raw[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    end = pos + 1
    while raw[end] & 0x80:
        end += 1
        if end - pos >= _MAX_VARINT:
            raise _UnsureError
    value = 0
    for index in range(end, pos - 1, -1):
        value = (value << 7) | (raw[index] & 0x7F)
    return (value >> 1) ^ -(value & 1), end + 1


def _string(raw: bytes, pos: int) -> tuple[str, int]:
    """A UTF-8 string at `pos`, and the position after it."""
    size = raw[pos]
    if size < 0x80 and not size & 1:  # a short string's length: one byte
        pos, size = pos + 1, size >> 1
    else:
        size, pos = _long(raw, pos)
        if size < 0:
            raise _UnsureError
    end = pos + size
    if end > len(raw):
        raise _UnsureError
    return raw[pos:end].decode(), end


def _branch(raw: bytes, pos: int) -> bool:
    """Whether a ["null", T] union at `pos` holds a T (its index is one byte)."""
    index = raw[pos]
    if index == _NULL:
        return False
    if index == _SET:
        return True
    raise _UnsureError


def _optional_long(raw: bytes, pos: int) -> tuple[int | None, int]:
    """A ["null", "long"] union at `pos`, and the position after it."""
    if _branch(raw, pos):
        return _long(raw, pos + 1)
    return None, pos + 1


def _symbol(raw: bytes, pos: int, symbols: dict[int, str]) -> str:
    symbol = symbols.get(raw[pos])
    if symbol is None:
        raise _UnsureError
    return symbol


def _head(raw: bytes, pos: int, datum: dict[str, Any]) -> int:
    """format_version to epochs; the position after them."""
    datum["format_version"], pos = _long(raw, pos)
    datum["run_id"], pos = _string(raw, pos)
    datum["benchmark_id"], pos = _string(raw, pos)
    datum["model"], pos = _string(raw, pos)
    datum["sample_index"], pos = _long(raw, pos)
    datum["epoch"], pos = _long(raw, pos)
    datum["sample_id"], pos = _string(raw, pos)
    datum["status"] = _symbol(raw, pos, _STATUS)
    datum["created_at"], pos = _long(raw, pos + 1)
    datum["epochs"], pos = _long(raw, pos)
    return pos


def _usage(raw: bytes, pos: int, datum: dict[str, Any], v3: bool) -> int:
    """dataset_size to config_fingerprint; the position after them."""
    datum["dataset_size"], pos = _optional_long(raw, pos)
    datum["selected_samples"] = None  # v2 has no such field: read as its default
    if v3:
        datum["selected_samples"], pos = _optional_long(raw, pos)
    datum["usage"] = None
    if _branch(raw, pos):
        tokens, pos = _long(raw, pos + 1)
        output, pos = _long(raw, pos)
        total, pos = _long(raw, pos)
        reasoning, pos = _long(raw, pos)
        datum["usage"] = {
            "input_tokens": tokens,
            "output_tokens": output,
            "total_tokens": total,
            "reasoning_tokens": reasoning,
            "total_cost": _DOUBLE(raw, pos)[0],
        }
        pos += 8
    else:
        pos += 1
    for name in ("generation_time_ms", "attempts"):
        datum[name], pos = _optional_long(raw, pos)
    datum["spent_cost"] = None
    if _branch(raw, pos):
        datum["spent_cost"] = _DOUBLE(raw, pos + 1)[0]
        pos += 8
    pos += 1
    datum["config_fingerprint"] = None
    if _branch(raw, pos):
        datum["config_fingerprint"], pos = _string(raw, pos + 1)
    else:
        pos += 1
    return pos


def _score(raw: bytes, pos: int) -> tuple[dict[str, Any], int]:
    """The score record at `pos`, and the position after it."""
    value = _symbol(raw, pos, _SCORE_VALUE)
    numeric = None
    if _branch(raw, pos + 1):
        numeric = _DOUBLE(raw, pos + 2)[0]
        pos += 8
    metrics: dict[str, float] = {}
    count, pos = _long(raw, pos + 2)
    while count:
        if count < 0:
            raise _UnsureError  # a sized block: rare, left to fastavro
        for _ in range(count):
            name, pos = _string(raw, pos)
            metrics[name] = _DOUBLE(raw, pos)[0]
            pos += 8
        count, pos = _long(raw, pos)
    answer = trajectory = None
    if _branch(raw, pos):
        answer, pos = _string(raw, pos + 1)
    else:
        pos += 1
    explanation, pos = _string(raw, pos)
    if _branch(raw, pos):
        trajectory, pos = _string(raw, pos + 1)
    else:
        pos += 1
    score = {
        "value": value,
        "numeric": numeric,
        "metrics": metrics,
        "answer": answer,
        "explanation": explanation,
        "trajectory": trajectory,
    }
    return score, pos


def _error(raw: bytes, pos: int) -> dict[str, Any] | None:
    if not _branch(raw, pos):
        return None
    kind, pos = _string(raw, pos + 1)
    message, pos = _string(raw, pos)
    status = None
    if _branch(raw, pos):
        status, pos = _long(raw, pos + 1)
    return {"kind": kind, "message": message, "http_status": status}


def read_fold_prefix(raw: bytes, start: int, *, v3: bool) -> dict[str, Any] | None:
    """The fold prefix of a v2 or v3 body starting at `start`, as fastavro reads it into v3's
    cut schema (`created_at` a plain long); None when fastavro must decide."""
    datum: dict[str, Any] = {}
    try:
        pos = _usage(raw, _head(raw, start, datum), datum, v3)
        datum["score"], pos = _score(raw, pos)
        datum["error"] = _error(raw, pos)
    except (_UnsureError, IndexError, UnicodeDecodeError, struct.error):
        return None
    return datum
