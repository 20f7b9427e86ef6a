"""An Inspect sample as a SampleResult: identity, score, usage, errors (docs/inspect.md)."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import pytest
from inspect_ai.log import EvalError, EvalLog, EvalSample
from inspect_ai.model import ModelUsage
from inspect_ai.scorer import Score

from resultlog.producer.inspect._mapping import to_record
from resultlog.producer.inspect._payload import decode
from resultlog.producer.inspect._task import TaskRun
from resultlog.schemas import Harness, RecordStatus, RunKey, SampleResult, ScoreValue, WriterProcess

HARNESS = Harness(name="inspect_ai", version="0.3.285")
WORKER = WriterProcess(host="test", pid=1)


def sample_of(log: EvalLog, sample_id: str, epoch: int) -> EvalSample:
    """The log's sample with this id and 1-based epoch."""
    [found] = [s for s in log.samples or [] if str(s.id) == sample_id and s.epoch == epoch]
    return found


def record(log: EvalLog, sample: EvalSample) -> SampleResult:
    return to_record(TaskRun.of(log.eval, log.plan), sample, HARNESS, WORKER)


def test_a_finished_sample_is_a_completed_record_keyed_by_task_model_id_and_epoch(
    mock_log: EvalLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESULTLOG_RUN_ID", "r1")
    sample = sample_of(mock_log, "b", 2)
    made = record(mock_log, sample)
    assert made.run_key == RunKey("r1", "mock_arith", "mockllm/model")
    assert (made.sample_id, made.sample_index, made.epoch) == ("b", 1, 1)
    assert (made.epochs, made.dataset_size, made.status) == (2, 2, RecordStatus.COMPLETED)
    assert (made.score.value, made.score.numeric) == (ScoreValue.I, 0.0)  # "7" is not "8"
    assert made.score.metrics == {"includes": 0.0}
    assert (made.input, made.target) == ("hi", "8")
    assert [m.role for m in made.messages] == ["user", "assistant"]
    assert made.usage is not None and made.usage.total_tokens == 5
    assert made.harness == HARNESS
    assert made.harness_payload is not None
    stored = decode(made.harness_payload)
    assert stored.sample == sample
    assert (stored.spec.task, stored.plan) == ("mock_arith", mock_log.plan)


def test_records_carry_the_tasks_configuration_and_its_fingerprint(mock_log: EvalLog) -> None:
    spec, plan = mock_log.eval, mock_log.plan
    made = record(mock_log, sample_of(mock_log, "b", 1))
    assert made.config is not None and made.config_fingerprint is not None
    config = json.loads(made.config)
    assert hashlib.sha256(made.config.encode()).hexdigest() == made.config_fingerprint
    assert (config["harness"], config["model"]) == ("inspect_ai", "mockllm/model")
    assert config["benchmark"]["name"] == "mock_arith"
    assert config["dataset"]["samples"] == 2
    assert [step["solver"] for step in config["plan"]["steps"]] == [
        "remember_active_sample",
        "generate",
    ]
    assert [scorer["name"] for scorer in config["scorers"]] == ["match", "includes"]

    def fingerprint(**update: Any) -> str:
        return TaskRun.of(spec.model_copy(update=update), plan).config.fingerprint

    same = made.config_fingerprint
    # What differs between an eval and its resume is not configuration.
    assert fingerprint(eval_id="other", run_id="other", task_file="elsewhere/task.py") == same
    limited = spec.config.model_copy(update={"limit": 1})
    assert fingerprint(config=limited) == same
    hotter = spec.model_generate_config.model_copy(update={"temperature": 0.7})
    assert fingerprint(model_generate_config=hotter) != same
    assert fingerprint(model="mockllm/other") != same
    assert fingerprint(task_version=2) != same


def test_secret_looking_model_arguments_keep_their_name_not_their_value(
    mock_log: EvalLog,
) -> None:
    spec = mock_log.eval.model_copy(update={"model_args": {"api_key": "sk-1", "region": "eu"}})
    config = json.loads(TaskRun.of(spec, mock_log.plan).config.canonical)
    assert config["model_args"] == {"api_key": "<redacted>", "region": "eu"}


def test_the_run_id_is_the_metadata_then_the_environment_then_the_eval_id(
    mock_log: EvalLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = mock_log.eval
    monkeypatch.delenv("RESULTLOG_RUN_ID", raising=False)
    assert TaskRun.of(spec, mock_log.plan).run_key.run_id == spec.eval_id
    monkeypatch.setenv("RESULTLOG_RUN_ID", "from-env")
    assert TaskRun.of(spec, mock_log.plan).run_key.run_id == "from-env"
    named = spec.model_copy(update={"metadata": {"resultlog_run": "from-metadata"}})
    assert TaskRun.of(named, mock_log.plan).run_key.run_id == "from-metadata"


def test_a_limit_range_offsets_sample_positions(mock_log: EvalLog) -> None:
    spec = mock_log.eval
    ranged = spec.model_copy(
        update={
            "config": spec.config.model_copy(update={"limit": (5, 7)}),
            "dataset": spec.dataset.model_copy(update={"sample_ids": ["c", "d"]}),
        }
    )
    task = TaskRun.of(ranged, mock_log.plan)
    assert (task.index_of("c"), task.index_of("d"), task.dataset_size) == (5, 6, 7)


def test_an_errored_sample_is_degraded_s_with_the_http_status_and_no_usage(
    mock_log: EvalLog,
) -> None:
    message = "RateLimitError('Error code: 429 - slow down')"
    failed = sample_of(mock_log, "7", 1).model_copy(
        update={"error": EvalError(message=message, traceback="", traceback_ansi="")}
    )
    made = record(mock_log, failed)
    assert made.status is RecordStatus.DEGRADED and made.score.value is ScoreValue.S
    assert made.error is not None
    assert (made.error.kind, made.error.http_status, made.error.message) == (
        "model_error",
        429,
        message,
    )
    assert made.usage is None


@pytest.mark.parametrize(
    ("value", "expected", "numeric"),
    [("C", "C", 1.0), ("I", "I", 0.0), ("P", "C", 0.5), (0.25, "I", 0.25), (math.nan, "S", None)],
)
def test_the_first_scorer_gives_the_value_and_numeric_score(
    mock_log: EvalLog, value: str | float, expected: str, numeric: float | None
) -> None:
    sample = sample_of(mock_log, "7", 1).model_copy(update={"scores": {"s": Score(value=value)}})
    made = record(mock_log, sample)
    assert (made.score.value, made.score.numeric) == (ScoreValue(expected), numeric)


def test_other_scorers_are_metrics_dicts_flattened_lists_and_nulls_left_out(
    mock_log: EvalLog,
) -> None:
    scores = {
        "first": Score(value="C"),
        "reward": Score(value=0.75),
        "parts": Score(value={"x": 1, "y": "C", "z": None}),
        "listed": Score(value=[1, 2]),
    }
    made = record(mock_log, sample_of(mock_log, "7", 1).model_copy(update={"scores": scores}))
    assert made.score.metrics == {"reward": 0.75, "parts.x": 1.0, "parts.y": 1.0}


def test_usage_and_cost_are_summed_over_the_sample_models(mock_log: EvalLog) -> None:
    usage = {
        "a": ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15, total_cost=0.5),
        "b": ModelUsage(
            input_tokens=1, output_tokens=2, total_tokens=3, reasoning_tokens=4, total_cost=0.25
        ),
    }
    sample = sample_of(mock_log, "7", 1).model_copy(update={"model_usage": usage})
    made = record(mock_log, sample)
    assert made.usage is not None
    assert made.usage.model_dump() == {
        "input_tokens": 11,
        "output_tokens": 7,
        "total_tokens": 18,
        "reasoning_tokens": 4,
        "total_cost": 0.75,
    }


def test_a_sample_cut_to_fit_says_so_in_truncated(
    mock_log: EvalLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    sample = sample_of(mock_log, "7", 1)
    sample = sample.model_copy(update={"metadata": {"blob": "x" * 100}})
    monkeypatch.setattr("resultlog.producer.inspect._mapping.encode", _encode_with_limit(1500))
    made = record(mock_log, sample)
    assert made.truncated is not None
    assert json.loads(made.truncated)["harness_payload"]["form"] in ("no_events", "minimal")


def _encode_with_limit(limit: int):  # type: ignore[no-untyped-def]
    from resultlog.producer.inspect import _payload

    return lambda header, sample: _payload.encode(header, sample, limit)
