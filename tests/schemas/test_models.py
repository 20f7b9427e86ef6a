"""SampleResult and its parts: what the contract accepts and refuses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from resultlog.schemas import (
    FORMAT_VERSION,
    Message,
    RecordError,
    RecordStatus,
    RunKey,
    SampleResult,
    Score,
    ScoreValue,
    ToolCall,
    Usage,
    WriterProcess,
    encode_key,
)
from tests.support.records import RecordFactory, record_fields


def _refusal(**overrides: object) -> str:
    """The validation message for a record built with these overrides."""
    with pytest.raises(ValidationError) as info:
        SampleResult(**record_fields(**overrides))
    return str(info.value)


def test_defaults_and_enums(make_record: RecordFactory) -> None:
    record = make_record()
    assert record.format_version == FORMAT_VERSION == 1
    assert record.status is RecordStatus.COMPLETED
    assert record.score.value is ScoreValue.C
    assert record.error is None and record.worker is None
    assert not record.degraded


def test_score_values_and_statuses_are_the_contracts_symbols() -> None:
    assert [v.value for v in ScoreValue] == ["C", "I", "S"]
    assert [s.value for s in RecordStatus] == ["completed", "degraded"]
    assert ScoreValue("I") is ScoreValue.I


def test_missing_sample_index_is_refused() -> None:
    fields = record_fields()
    del fields["sample_index"]
    with pytest.raises(ValidationError, match="sample_index"):
        SampleResult(**fields)


@pytest.mark.parametrize("field", ["sample_index", "epoch", "chunk_index", "dataset_size"])
def test_negative_indexes_are_refused(field: str) -> None:
    message = _refusal(**{field: -1})
    assert field in message and "greater than or equal to 0" in message


def test_epoch_must_be_below_epochs() -> None:
    message = _refusal(epoch=2, epochs=2)
    assert "epoch must be < epochs (epoch=2, epochs=2)" in message


def test_epochs_must_be_positive() -> None:
    message = _refusal(epoch=0, epochs=0)
    assert "epochs" in message and "greater than or equal to 1" in message


def test_sample_index_must_be_inside_the_dataset() -> None:
    assert "sample_index must be < dataset_size" in _refusal(sample_index=1000, dataset_size=1000)


def test_unknown_score_value_is_refused() -> None:
    with pytest.raises(ValidationError, match="value") as info:
        Score(value="X")  # type: ignore[arg-type]  # deliberately ill-typed: the check at run time is under test
    assert "'C', 'I' or 'S'" in str(info.value)


@pytest.mark.parametrize("version", [0, 2, "1"])
def test_format_version_other_than_1_is_refused(version: object) -> None:
    assert "format_version" in _refusal(format_version=version)


def test_degraded_without_error_is_refused() -> None:
    assert "error is required when status is 'degraded'" in _refusal(status="degraded")


def test_completed_with_error_is_refused() -> None:
    error = RecordError(kind="model_error", message="boom", http_status=500)
    assert "error must be null when status is 'completed'" in _refusal(error=error)


def test_degraded_record(degraded_record: SampleResult) -> None:
    assert degraded_record.degraded
    assert degraded_record.error == RecordError(
        kind="model_error", message="429 Too Many Requests", http_status=429
    )


@pytest.mark.parametrize("field", ["run_id", "benchmark_id", "model", "sample_id"])
def test_identity_strings_must_not_be_empty(field: str) -> None:
    assert field in _refusal(**{field: ""})


def test_unknown_fields_are_refused() -> None:
    assert "surprise" in _refusal(surprise=1)


@pytest.mark.parametrize("value", [True, "7", 7.0])
def test_counts_are_strict_integers(value: object) -> None:
    assert "sample_index" in _refusal(sample_index=value)


def test_counts_must_fit_an_avro_long() -> None:
    assert "sample_index" in _refusal(sample_index=2**63, dataset_size=None)


def test_json_text_fields_must_be_json() -> None:
    assert "metadata" in _refusal(metadata="{not json")
    with pytest.raises(ValidationError, match="arguments"):
        ToolCall(id="c", name="f", arguments="nope")
    with pytest.raises(ValidationError, match="trajectory"):
        Score(value=ScoreValue.C, trajectory="[1,")
    with pytest.raises(ValidationError, match="content_parts"):
        Message(role="user", content_parts="{")


@pytest.mark.parametrize("metric", [float("nan"), float("inf")])
def test_metrics_must_be_finite(metric: float) -> None:
    with pytest.raises(ValidationError, match="metrics"):
        Score(value=ScoreValue.C, metrics={"reward": metric})


def test_usage_and_worker_constraints() -> None:
    with pytest.raises(ValidationError, match="total_cost"):
        Usage(input_tokens=1, output_tokens=1, total_tokens=2, total_cost=-1.0)
    with pytest.raises(ValidationError, match="pid"):
        WriterProcess(host="h", pid=-5)
    with pytest.raises(ValidationError, match="http_status"):
        RecordError(kind="model_error", message="m", http_status=42)


def test_created_at_is_utc_milliseconds(make_record: RecordFactory) -> None:
    plus_two = timezone(timedelta(hours=2))
    record = make_record(created_at=datetime(2026, 1, 2, 3, 4, 5, 678999, tzinfo=plus_two))
    assert record.created_at == datetime(2026, 1, 2, 1, 4, 5, 678000, tzinfo=UTC)
    assert record.created_at.tzinfo is UTC


def test_naive_created_at_is_refused() -> None:
    assert "created_at" in _refusal(created_at=datetime(2026, 1, 1))


def test_models_are_frozen(make_record: RecordFactory) -> None:
    record = make_record()
    with pytest.raises(ValidationError, match="frozen"):
        record.epoch = 0
    assert isinstance(record.messages, tuple)


def test_run_key_and_key(make_record: RecordFactory) -> None:
    record = make_record()
    assert record.run_key == RunKey("run-1", "arith", "openai/gpt-4o")
    assert record.key == b"run-1/arith/openai%2Fgpt-4o/7/1"
    assert record.key == encode_key(record.run_key, 7, 1)


def test_model_dump_is_json_friendly(make_record: RecordFactory) -> None:
    dumped = make_record().model_dump(mode="json")
    assert dumped["status"] == "completed"
    assert dumped["score"]["value"] == "C"
    assert dumped["created_at"] == "2026-11-29T07:30:12.345000Z"
    assert SampleResult.model_validate(dumped) == make_record()


_USAGE = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}


@pytest.mark.parametrize(
    ("overrides", "field", "bound"),
    [
        ({"sample_index": 2**31, "dataset_size": None}, "sample_index", "2147483647"),
        ({"epochs": 2**31}, "epochs", "2147483647"),
        ({"generation_time_ms": 2**32}, "generation_time_ms", "4294967295"),
        (
            {"usage": Usage(**_USAGE).model_dump() | {"input_tokens": 2**40}},
            "input_tokens",
            "4294967295",
        ),
        ({"usage": _USAGE | {"total_cost": 1e308}}, "total_cost", "1000000"),
        ({"usage": _USAGE | {"total_cost": -0.5}}, "total_cost", "0"),
        (
            {"score": {"value": "C", "metrics": {"reward": 1.7e308}}},
            "metrics.reward",
            "1000000000000",
        ),
        (
            {"score": {"value": "C", "metrics": {"reward": -1.7e308}}},
            "metrics.reward",
            "-1000000000000",
        ),
        ({"score": {"value": "C", "numeric": 1.5}}, "numeric", "1"),
        ({"spent_cost": 2e6}, "spent_cost", "1000000"),
        ({"attempts": 2**31}, "attempts", "2147483647"),
    ],
)
def test_numbers_out_of_bounds_are_refused_naming_the_field(
    overrides: dict[str, object], field: str, bound: str
) -> None:
    message = _refusal(**overrides)
    assert field in message and bound in message


def test_numbers_at_their_bounds_are_accepted() -> None:
    usage = Usage(
        input_tokens=2**32 - 1,
        output_tokens=2**32 - 1,
        total_tokens=2**32 - 1,
        reasoning_tokens=2**32 - 1,
        total_cost=1e6,
    )
    record = SampleResult(
        **record_fields(
            usage=usage,
            generation_time_ms=2**32 - 1,
            sample_index=2**31 - 2,
            dataset_size=2**31 - 1,
            epochs=2**31 - 1,
            score=Score(value=ScoreValue.C, numeric=1.0, metrics={"a": 1e12, "b": -1e12}),
            spent_cost=1e6,
            attempts=2**31 - 1,
        )
    )
    assert record.spent == 1e6 and record.kept_cost == 1e6


def test_the_bill_includes_the_kept_attempt() -> None:
    assert "spent_cost must be >= usage.total_cost" in _refusal(spent_cost=0.00001)
    assert SampleResult(**record_fields()).spent == 0.0001  # v1: the kept cost
    assert SampleResult(**record_fields(spent_cost=0.5)).spent == 0.5


def test_config_and_its_fingerprint_come_together() -> None:
    assert "set together" in _refusal(config='{"model": "m"}')
    assert "set together" in _refusal(config_fingerprint="abc")


def test_harness_payload_is_bounded() -> None:
    message = _refusal(harness_payload=b"x" * (512 * 1024 + 1))
    assert "harness_payload" in message and "524288" in message
