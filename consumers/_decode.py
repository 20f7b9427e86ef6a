"""Decode one results-topic message: key and value must agree.

`RunViewReader` decides the common value of one run key, a v2 or v3 record whose key is
canonical, in one pass: the key's indexes read after the run key prefix, the fold prefix read
by hand and checked (`FoldPrefix.acceptable`), the view built without validating it again.
Anything else takes the full path (`decode_key`, `decode_view`), which accepts the same
records and says why it refuses the others.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Final, NoReturn, TypeVar

from pydantic import BaseModel

from resultlog.consumers._contribution import Contribution
from resultlog.schemas import (
    Codec,
    DecodeError,
    FoldFields,
    FoldPrefix,
    FoldView,
    Location,
    RecordError,
    RecordId,
    RecordStatus,
    RunKey,
    SampleResult,
    Score,
    ScoreValue,
    Usage,
    run_key_prefix,
)

__all__ = [
    "RunViewReader",
    "created_us",
    "decode_contribution",
    "decode_value",
    "decode_view",
    "view_of",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def created_us(record: SampleResult | FoldView) -> int:
    """A record's created_at in microseconds since the epoch (a view's wire milliseconds)."""
    if isinstance(record, FoldView):
        return record.created_at_ms * 1000
    return (record.created_at - _EPOCH) // _MICROSECOND


def decode_value(codec: Codec, key: RecordId, value: bytes, at: Location) -> SampleResult:
    """The record in `value`, read at `at`, checked against the record id of its key."""
    record = codec.decode_sample_result(value, at=at)
    _check_key(record, key, value, at)
    return record


def decode_view(codec: Codec, key: RecordId, value: bytes, at: Location) -> FoldView:
    """The fold view of the record in `value`, checked against the record id of its key."""
    view = codec.decode_fold_view(value, at=at)
    _check_key(view, key, value, at)
    return view


def decode_contribution(codec: Codec, key: RecordId, value: bytes, at: Location) -> Contribution:
    """What the record in `value` adds to its run, checked against the record id of its key
    (accepts and refuses exactly what `decode_view` does, without building a FoldView)."""
    fields = codec.decode_fold_fields(value, at=at)
    identity = (fields["run_id"], fields["benchmark_id"], fields["model"])
    if not _agrees(key, identity, fields["sample_index"], fields["epoch"]):
        _mismatch(key, _FieldsId(fields), value, at)
    return Contribution.of_fields(fields)


class _FieldsId:
    """The identity fields of FoldFields, read as a record's attributes (for the message)."""

    def __init__(self, fields: FoldFields) -> None:
        self.run_key = RunKey(fields["run_id"], fields["benchmark_id"], fields["model"])
        self.sample_index = fields["sample_index"]
        self.epoch = fields["epoch"]


def _check_key(record: SampleResult | FoldView, key: RecordId, value: bytes, at: Location) -> None:
    """Refuse a value whose run key, sample index or epoch is not its key's."""
    identity = (record.run_id, record.benchmark_id, record.model)
    if not _agrees(key, identity, record.sample_index, record.epoch):
        _mismatch(key, record, value, at)


def _agrees(key: RecordId, identity: tuple[str, str, str], sample_index: int, epoch: int) -> bool:
    """Whether a value's (run_id, benchmark_id, model), sample index and epoch are its key's
    (compared as text: building the value's RunKey would validate it again)."""
    run_key = key.run_key
    return (
        identity == (run_key.run_id, run_key.benchmark_id, run_key.model)
        and sample_index == key.sample_index
        and epoch == key.epoch
    )


def _mismatch(
    key: RecordId, record: SampleResult | FoldView | _FieldsId, value: bytes, at: Location
) -> NoReturn:
    """Refuse a value whose identity is not its key's."""
    raise DecodeError(
        f"key names {key.run_key} sample {key.sample_index} epoch {key.epoch} but the value is "
        f"{record.run_key} sample {record.sample_index} epoch {record.epoch}",
        value,
        at,
    )


_ZERO: Final = 0x30
_NINE: Final = 0x39
_MAX_DIGITS: Final = 18  # below 10**18: decode_key's fast rule, so it fits a long
_SCORE_VALUES: Final = {value.value: value for value in ScoreValue}
_Model = TypeVar("_Model", bound=BaseModel)


class RunViewReader:
    """Fold views of one run key's values, the common record in one pass (see the module)."""

    def __init__(self, codec: Codec, run_key: RunKey) -> None:
        self.codec = codec
        self.parts = (run_key.run_id, run_key.benchmark_id, run_key.model)
        self.start = len(run_key_prefix(run_key))

    def indexes(self, key: bytes) -> tuple[int, int] | None:
        """The sample index and epoch of a key that starts with the run key prefix, when both
        are canonical and short (then `decode_key` reads the same); None: it decides."""
        slash = key.find(b"/", self.start)
        if slash < 0:
            return None
        sample_index = _canonical(key, self.start, slash)
        epoch = _canonical(key, slash + 1, len(key))
        if sample_index < 0 or epoch < 0:
            return None
        return sample_index, epoch

    def view(self, sample_index: int, epoch: int, value: bytes) -> FoldView | None:
        """The fold view of a value read under a key with these indexes, if it is the common
        case that `decode_view` certainly accepts with these values (None: it decides)."""
        prefix = self.codec.fold_prefix(value)
        if (
            prefix is None
            or (prefix.run_id, prefix.benchmark_id, prefix.model) != self.parts
            or prefix.sample_index != sample_index
            or prefix.epoch != epoch
            or not prefix.acceptable()
        ):
            return None
        return view_of(prefix)


def _canonical(key: bytes, start: int, end: int) -> int:
    """The canonical decimal index in key[start:end] (no sign, no leading zero); -1 if none."""
    digits = end - start
    if digits < 1 or digits > _MAX_DIGITS or (digits > 1 and key[start] == _ZERO):
        return -1
    value = 0
    for position in range(start, end):
        byte = key[position]
        if byte < _ZERO or byte > _NINE:
            return -1
        value = value * 10 + byte - _ZERO
    return value


def view_of(prefix: FoldPrefix) -> FoldView:
    """The FoldView validation builds of an acceptable prefix, built without validating it
    again (tests/consumers/test_run_views.py proves the two the same)."""
    usage = None
    if prefix.has_usage:
        usage = _built(
            Usage,
            {
                "input_tokens": prefix.input_tokens,
                "output_tokens": prefix.output_tokens,
                "total_tokens": prefix.total_tokens,
                "reasoning_tokens": prefix.reasoning_tokens,
                "total_cost": prefix.total_cost,
            },
        )
    score = _built(
        Score,
        {
            "value": _SCORE_VALUES[prefix.value],
            "numeric": prefix.numeric,
            "metrics": dict(prefix.metrics.items),  # each view its own, as validation gives
            "answer": prefix.answer,
            "explanation": prefix.explanation,
            "trajectory": prefix.trajectory,
        },
    )
    error = prefix.error
    return _built(
        FoldView,
        {
            "format_version": prefix.format_version,
            "run_id": prefix.run_id,
            "benchmark_id": prefix.benchmark_id,
            "model": prefix.model,
            "sample_index": prefix.sample_index,
            "epoch": prefix.epoch,
            "sample_id": prefix.sample_id,
            "status": RecordStatus.DEGRADED if prefix.degraded else RecordStatus.COMPLETED,
            "created_at_ms": prefix.created_at_ms,
            "epochs": prefix.epochs,
            "dataset_size": prefix.dataset_size,
            "selected_samples": prefix.selected_samples,
            "usage": usage,
            "generation_time_ms": prefix.generation_time_ms,
            "attempts": prefix.attempts,
            "spent_cost": prefix.spent_cost,
            "config_fingerprint": prefix.config_fingerprint,
            "score": score,
            "error": None
            if error is None
            else _built(
                RecordError, {"kind": error[0], "message": error[1], "http_status": error[2]}
            ),
        },
    )


def _built(model: type[_Model], fields: dict[str, Any]) -> _Model:
    """A model holding exactly `fields` (every one of its fields, in order), as pydantic's
    `model_construct` sets one up, without its walk over the fields (a third of a decode)."""
    built = object.__new__(model)
    object.__setattr__(built, "__dict__", fields)
    object.__setattr__(built, "__pydantic_fields_set__", set(fields))
    object.__setattr__(built, "__pydantic_extra__", None)
    object.__setattr__(built, "__pydantic_private__", None)
    return built
