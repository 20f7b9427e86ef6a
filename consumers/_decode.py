"""Decode one results-topic message: key and value must agree.

A v2 or v3 value is read by hand into a `FoldPrefix` and checked (`FoldPrefix.acceptable`,
proven equal to FoldView's validation); any other value, and one the check refuses, is read
by fastavro into a `FoldView` (pydantic, the specification), which says why it refuses.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

from pydantic import BaseModel

from resultlog.consumers._contribution import Contribution
from resultlog.schemas import (
    Codec,
    DecodeError,
    FoldPrefix,
    FoldView,
    Location,
    RecordError,
    RecordId,
    RecordStatus,
    SampleResult,
    Score,
    ScoreValue,
    Usage,
)

__all__ = [
    "decode_contribution",
    "decode_value",
    "decode_view",
    "view_of",
]


def decode_value(codec: Codec, key: RecordId, value: bytes, at: Location) -> SampleResult:
    """The record in `value`, read at `at`, checked against the record id of its key."""
    record = codec.decode_sample_result(value, at=at)
    _check_key(record, key, value, at)
    return record


def decode_view(codec: Codec, key: RecordId, value: bytes, at: Location) -> FoldView:
    """The fold view of the record in `value`, checked against the record id of its key."""
    prefix = _accepted(codec, key, value, at)
    if prefix is not None:
        return view_of(prefix)
    return _validated_view(codec, key, value, at)


def decode_contribution(codec: Codec, key: RecordId, value: bytes, at: Location) -> Contribution:
    """What the record in `value` adds to its run, checked against the record id of its key
    (accepts and refuses exactly what `decode_view` does)."""
    prefix = _accepted(codec, key, value, at)
    if prefix is not None:
        return Contribution.of_prefix(prefix)
    return Contribution.of(_validated_view(codec, key, value, at))


def _accepted(codec: Codec, key: RecordId, value: bytes, at: Location) -> FoldPrefix | None:
    """The hand-read fold prefix of `value` if the contract accepts it and it names its key's
    record (the key's run key parts are valid, so equal ones are); None: FoldView decides."""
    prefix = codec.fold_prefix(value, at=at)
    if prefix is None or not prefix.acceptable():
        return None
    run_key = key.run_key
    if (
        prefix.run_id != run_key.run_id
        or prefix.benchmark_id != run_key.benchmark_id
        or prefix.model != run_key.model
        or prefix.sample_index != key.sample_index
        or prefix.epoch != key.epoch
    ):
        return None
    return prefix


def _validated_view(codec: Codec, key: RecordId, value: bytes, at: Location) -> FoldView:
    """The fold view read by fastavro and validated by FoldView, checked against its key."""
    view = codec.decode_fold_view(value, at=at)
    _check_key(view, key, value, at)
    return view


def _check_key(record: SampleResult | FoldView, key: RecordId, value: bytes, at: Location) -> None:
    """Refuse a value whose run key, sample index or epoch is not its key's."""
    if (record.run_key, record.sample_index, record.epoch) != key:
        raise DecodeError(
            f"key names {key.run_key} sample {key.sample_index} epoch {key.epoch} but the value "
            f"is {record.run_key} sample {record.sample_index} epoch {record.epoch}",
            value,
            at,
        )


_SCORE_VALUES: Final = {value.value: value for value in ScoreValue}
_Model = TypeVar("_Model", bound=BaseModel)


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
            "created_at": prefix.created_at_ms,
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
