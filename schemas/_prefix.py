"""A hand-written reader of schema v2's and v3's fold prefix, and the contract's check of it.

fastavro's generic reader walks the schema for every value; the fold prefix is fixed, so this
reads it straight from the bytes into a `FoldPrefix`. It answers only when its answer is
certainly fastavro's: bytes it is not sure of (a varint over 9 bytes, a union or enum index
not in its canonical one-byte form, a negative map block count, a length past the end, bad
UTF-8) make it return None, and the caller reads the value with fastavro, which decides.
`FoldPrefix.acceptable` is FoldView's validation on the values read, without a model, against
the bounds of `_limits`. Checked against fastavro and FoldView on valid, mutated and random
bytes (tests/schemas/test_fold_prefix.py).
"""

from __future__ import annotations

import struct
from typing import Final

from resultlog.schemas import _limits
from resultlog.schemas.errors import SchemaError

__all__ = ["FoldPrefix", "Metrics", "read_prefix", "read_rest"]

_DOUBLE = struct.Struct("<d").unpack_from
_MAX_VARINT = 9  # up to 63 bits: fastavro's 64-bit arithmetic and Python's ints agree
# Canonical one-byte zig-zag encodings of an enum or union index.
_NULL, _SET = 0, 2
_COMPLETED, _DEGRADED = 0, 2
_SCORE_VALUES: Final = {0: "C", 2: "I", 4: "S"}
# The bounds, typed for the compiled path (it then compares machine ints and doubles).
_FIRST_MS: Final[int] = _limits.FIRST_MS
_LAST_MS: Final[int] = _limits.LAST_MS
_MIN_HTTP: Final[int] = _limits.MIN_HTTP_STATUS
_MAX_HTTP: Final[int] = _limits.MAX_HTTP_STATUS
_MAX_INDEX: Final[int] = _limits.MAX_INDEX
_MAX_TOKENS: Final[int] = _limits.MAX_TOKENS
_MAX_MILLIS: Final[int] = _limits.MAX_MILLIS
_MAX_COST: Final[float] = _limits.MAX_COST_USD
_MAX_METRIC: Final[float] = _limits.MAX_METRIC
_METRICS_HELD = 1024  # distinct metric blocks remembered: records of a run repeat a few


class _UnsureError(SchemaError):
    """Bytes this reader leaves to fastavro."""


class Metrics:
    """A score's metrics map as read: in wire order, sorted by name, and whether in bounds."""

    def __init__(self, items: dict[str, float]) -> None:
        self.items = items  # shared by the records with the same bytes: never changed
        self.sorted: tuple[tuple[str, float], ...] = tuple(sorted(items.items()))
        # A comparison with NaN is false: NaN and the infinities are out of bounds.
        self.bounded = all(-_MAX_METRIC <= value <= _MAX_METRIC for value in items.values())


_NO_METRICS: Final = Metrics({})
_metrics_held: dict[bytes, Metrics] = {}


class FoldPrefix:
    """The fold fields of one v2 or v3 value, as its bytes hold them (not yet checked)."""

    format_version: int
    run_id: str
    benchmark_id: str
    model: str
    sample_index: int
    epoch: int
    sample_id: str
    degraded: bool
    created_at_ms: int
    epochs: int
    dataset_size: int | None
    selected_samples: int | None
    has_usage: bool
    input_tokens: int
    output_tokens: int
    total_tokens: int
    reasoning_tokens: int
    total_cost: float
    generation_time_ms: int | None
    attempts: int | None
    spent_cost: float | None
    config_fingerprint: str | None
    value: str
    numeric: float | None
    metrics: Metrics
    answer: str | None
    explanation: str
    trajectory: str | None
    error: tuple[str, str, int | None] | None

    def acceptable(self) -> bool:
        """Whether FoldView accepts these values, the run key's three parts aside (the caller
        checks those: against the record's key, or with `is_run_key_part`)."""
        return self._own_bounds() and self._cross_rules()

    def _own_bounds(self) -> bool:
        """Every field's own bounds (rule 9) and non-empty texts."""
        if self.format_version != 1 or not self.sample_id:
            return False
        if not (0 <= self.sample_index <= _MAX_INDEX and 0 <= self.epoch <= _MAX_INDEX):
            return False
        if not (1 <= self.epochs <= _MAX_INDEX and _FIRST_MS <= self.created_at_ms <= _LAST_MS):
            return False
        size, selected, millis = self.dataset_size, self.selected_samples, self.generation_time_ms
        if size is not None and not 0 <= size <= _MAX_INDEX:
            return False
        if selected is not None and not 1 <= selected <= _MAX_INDEX:
            return False
        if millis is not None and not 0 <= millis <= _MAX_MILLIS:
            return False
        if self.attempts is not None and not 0 <= self.attempts <= _MAX_INDEX:
            return False
        if self.config_fingerprint is not None and not self.config_fingerprint:
            return False
        return self._usage_bounds() and self._score_bounds() and self._error_bounds()

    def _usage_bounds(self) -> bool:
        spent = self.spent_cost
        if spent is not None and not 0.0 <= spent <= _MAX_COST:
            return False
        if not self.has_usage:
            return True
        return (
            0 <= self.input_tokens <= _MAX_TOKENS
            and 0 <= self.output_tokens <= _MAX_TOKENS
            and 0 <= self.total_tokens <= _MAX_TOKENS
            and 0 <= self.reasoning_tokens <= _MAX_TOKENS
            and 0.0 <= self.total_cost <= _MAX_COST
        )

    def _score_bounds(self) -> bool:
        numeric = self.numeric
        return (numeric is None or 0.0 <= numeric <= 1.0) and self.metrics.bounded

    def _error_bounds(self) -> bool:
        error = self.error
        if error is None:
            return True
        status = error[2]
        return error[0] != "" and (status is None or _MIN_HTTP <= status <= _MAX_HTTP)

    def _cross_rules(self) -> bool:
        """SampleResult's rules across fields (they involve only the prefix)."""
        size, selected, spent = self.dataset_size, self.selected_samples, self.spent_cost
        kept = self.total_cost if self.has_usage else 0.0
        return (
            self.epoch < self.epochs
            and (size is None or self.sample_index < size)
            and (size is None or selected is None or selected <= size)
            and self.degraded == (self.error is not None)
            and (spent is None or spent >= kept)
        )


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


def _span(raw: bytes, pos: int) -> tuple[int, int]:
    """Where a string's or bytes' content at `pos` starts and ends."""
    size = raw[pos]
    if size < 0x80 and not size & 1:  # a short length: one byte
        pos, size = pos + 1, size >> 1
    else:
        size, pos = _long(raw, pos)
        if size < 0:
            raise _UnsureError
    end = pos + size
    if end > len(raw):
        raise _UnsureError
    return pos, end


def _string(raw: bytes, pos: int) -> tuple[str, int]:
    """A UTF-8 string at `pos`, and the position after it."""
    start, end = _span(raw, pos)
    return raw[start:end].decode(), end


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


def _optional_string(raw: bytes, pos: int) -> tuple[str | None, int]:
    """A ["null", "string"] union at `pos`, and the position after it."""
    if _branch(raw, pos):
        return _string(raw, pos + 1)
    return None, pos + 1


def _head(raw: bytes, pos: int, prefix: FoldPrefix) -> int:
    """sample_index to epochs; the position after them."""
    prefix.sample_index, pos = _long(raw, pos)
    prefix.epoch, pos = _long(raw, pos)
    prefix.sample_id, pos = _string(raw, pos)
    status = raw[pos]
    if status not in (_COMPLETED, _DEGRADED):
        raise _UnsureError
    prefix.degraded = status == _DEGRADED
    prefix.created_at_ms, pos = _long(raw, pos + 1)
    prefix.epochs, pos = _long(raw, pos)
    return pos


def _usage(raw: bytes, pos: int, prefix: FoldPrefix, v3: bool) -> int:
    """dataset_size to config_fingerprint; the position after them."""
    prefix.dataset_size, pos = _optional_long(raw, pos)
    prefix.selected_samples = None  # v2 has no such field: read as its default
    if v3:
        prefix.selected_samples, pos = _optional_long(raw, pos)
    prefix.has_usage = _branch(raw, pos)
    if prefix.has_usage:
        prefix.input_tokens, pos = _long(raw, pos + 1)
        prefix.output_tokens, pos = _long(raw, pos)
        prefix.total_tokens, pos = _long(raw, pos)
        prefix.reasoning_tokens, pos = _long(raw, pos)
        prefix.total_cost = _DOUBLE(raw, pos)[0]
        pos += 8
    else:
        prefix.input_tokens = prefix.output_tokens = prefix.total_tokens = 0
        prefix.reasoning_tokens, prefix.total_cost = 0, 0.0
        pos += 1
    prefix.generation_time_ms, pos = _optional_long(raw, pos)
    prefix.attempts, pos = _optional_long(raw, pos)
    prefix.spent_cost = None
    if _branch(raw, pos):
        prefix.spent_cost = _DOUBLE(raw, pos + 1)[0]
        pos += 8
    prefix.config_fingerprint, pos = _optional_string(raw, pos + 1)
    return pos


def _metrics(raw: bytes, pos: int) -> tuple[Metrics, int]:
    """The score's metrics map at `pos` (read once per distinct bytes), and the position after."""
    if raw[pos] == 0:
        return _NO_METRICS, pos + 1
    start = pos
    count, pos = _long(raw, pos)
    while count:
        if count < 0:
            raise _UnsureError  # a sized block: rare, left to fastavro
        for _ in range(count):
            pos = _span(raw, pos)[1] + 8
        count, pos = _long(raw, pos)
    if pos > len(raw):
        raise _UnsureError
    block = raw[start:pos]
    held = _metrics_held.get(block)
    if held is None:
        held = Metrics(_read_metrics(raw, start))
        if len(_metrics_held) >= _METRICS_HELD:
            _metrics_held.clear()
        _metrics_held[block] = held
    return held, pos


def _read_metrics(raw: bytes, pos: int) -> dict[str, float]:
    """The names and values of a metrics map whose blocks are known to be well formed."""
    items: dict[str, float] = {}
    count, pos = _long(raw, pos)
    while count:
        for _ in range(count):
            name, pos = _string(raw, pos)
            items[name] = _DOUBLE(raw, pos)[0]
            pos += 8
        count, pos = _long(raw, pos)
    return items


def _score(raw: bytes, pos: int, prefix: FoldPrefix) -> int:
    """The score record at `pos`; the position after it."""
    value = _SCORE_VALUES.get(raw[pos])
    if value is None:
        raise _UnsureError
    prefix.value = value
    prefix.numeric = None
    if _branch(raw, pos + 1):
        prefix.numeric = _DOUBLE(raw, pos + 2)[0]
        pos += 8
    prefix.metrics, pos = _metrics(raw, pos + 2)
    prefix.answer, pos = _optional_string(raw, pos)
    prefix.explanation, pos = _string(raw, pos)
    prefix.trajectory, pos = _optional_string(raw, pos)
    return pos


def _error(raw: bytes, pos: int) -> tuple[str, str, int | None] | None:
    if not _branch(raw, pos):
        return None
    kind, pos = _string(raw, pos + 1)
    message, pos = _string(raw, pos)
    status, pos = _optional_long(raw, pos)
    return kind, message, status


def read_prefix(raw: bytes, start: int, v3: bool) -> FoldPrefix | None:
    """The fold prefix of a v2 or v3 body starting at `start`; None when fastavro must decide."""
    prefix = FoldPrefix()
    try:
        prefix.format_version, pos = _long(raw, start)
        prefix.run_id, pos = _string(raw, pos)
        prefix.benchmark_id, pos = _string(raw, pos)
        prefix.model, pos = _string(raw, pos)
    except (_UnsureError, IndexError, UnicodeDecodeError):
        return None
    return prefix if read_rest(prefix, raw, pos, v3) else None


def read_rest(prefix: FoldPrefix, raw: bytes, pos: int, v3: bool) -> bool:
    """Read the fields after the run key's parts (sample_index on, from `pos`) into `prefix`,
    whose format version and run key parts are set; False when fastavro must decide (then
    `prefix` is partly overwritten: read it again before any use)."""
    try:
        pos = _usage(raw, _head(raw, pos, prefix), prefix, v3)
        prefix.error = _error(raw, _score(raw, pos, prefix))
    except (_UnsureError, IndexError, UnicodeDecodeError, struct.error):
        return False
    return True
