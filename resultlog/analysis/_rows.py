"""One run's latest records as plain rows: one per run key, one per (sample, epoch).

Everything here is computed by the readers' own code: the summary by the fold (`fold`, as
replay computes it), the accuracy interval and the per-sample values by the runs page's view
(`RunSamples`), so a table's numbers are those of replay and of the HTTP API, bit for bit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from resultlog.consumers import RunRecords, RunSamples, fold_records
from resultlog.schemas import RunKey, RunSummary, SampleResult, ScoreValue

__all__ = ["CONFIG_PREFIX", "METRIC_PREFIX", "ReadRun", "config_columns", "sample_row"]

METRIC_PREFIX = "metric."
CONFIG_PREFIX = "config."
_USAGE = ("input_tokens", "output_tokens", "total_tokens", "reasoning_tokens", "total_cost")


@dataclass(frozen=True)
class ReadRun:
    """One run key's latest records, as the resume reader (and the aggregator) read them."""

    run_key: RunKey
    loaded: RunRecords

    @cached_property
    def summary(self) -> RunSummary:
        """The run's summary, folded as replay folds it."""
        return fold_records(self.loaded.records, self.run_key)

    @cached_property
    def view(self) -> RunSamples:
        """The run's per-sample view, as the runs page and `/compare` compute it."""
        return RunSamples.of(self.run_key, self.loaded)

    def run_row(self) -> dict[str, Any]:
        """The run's row of `runs_df`."""
        summary, accuracy = self.summary, self.view.accuracy()
        usage = summary.usage
        records = self.loaded.records
        created = [record.created_at for record in records]
        configured = [record for record in records if record.config_fingerprint is not None]
        newest = max(configured, key=lambda r: (r.created_at, r.key), default=None)
        return {
            **_key_columns(self.run_key),
            "records": summary.records,
            "expected_records": summary.expected_records,
            "degraded_records": summary.degraded_records,
            "total_questions": summary.total_questions,
            "correct_answers": summary.correct_answers,
            "skipped_questions": summary.skipped_questions,
            "out_of_shape": summary.out_of_shape,
            "undecodable": self.loaded.undecodable,
            "accuracy": summary.accuracy,
            "accuracy_stderr": accuracy.stderr,
            "accuracy_ci_low": accuracy.low,
            "accuracy_ci_high": accuracy.high,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
            "total_cost": usage.total_cost,
            "spent_cost": summary.spent_cost,
            "generation_time_ms": summary.generation_time_ms,
            "first_record_at": min(created, default=None),
            "last_record_at": max(created, default=None),
            "config_fingerprint": None if newest is None else newest.config_fingerprint,
            "configs": len({record.config_fingerprint for record in configured}),
            **{METRIC_PREFIX + name: value for name, value in summary.metrics.items()},
            **config_columns(None if newest is None else newest.config),
        }

    def sample_rows(self, *, full: bool) -> Iterator[dict[str, Any]]:
        """The rows of `samples_df`, by (sample_index, epoch)."""
        shape = self.view.shape
        records = sorted(self.loaded.records, key=lambda r: (r.sample_index, r.epoch))
        for record in records:
            in_shape = shape is not None and shape.holds(record.sample_index, record.epoch)
            yield sample_row(record, in_shape=in_shape, full=full)


def sample_row(record: SampleResult, *, in_shape: bool, full: bool) -> dict[str, Any]:
    """One latest record as a row of `samples_df`."""
    score, usage, error = record.score, record.usage, record.error
    row: dict[str, Any] = {
        **_key_columns(record.run_key),
        "sample_id": record.sample_id,
        "sample_index": record.sample_index,
        "epoch": record.epoch,
        "epochs": record.epochs,
        "dataset_size": record.dataset_size,
        "selected_samples": record.selected_samples,
        "in_shape": in_shape,
        "status": record.status.value,
        "degraded": record.degraded,
        "score_value": score.value.value,
        "score_numeric": score.numeric,
        "points": _points(record),
        "score_answer": score.answer,
        **{name: None if usage is None else getattr(usage, name) for name in _USAGE},
        "generation_time_ms": record.generation_time_ms,
        "attempts": record.attempts,
        "spent_cost": record.spent_cost,
        "error_kind": None if error is None else error.kind,
        "http_status": None if error is None else error.http_status,
        "error_message": None if error is None else error.message,
        "config_fingerprint": record.config_fingerprint,
        "chunk_id": record.chunk_id,
        "chunk_index": record.chunk_index,
        "harness": None if record.harness is None else record.harness.name,
        "created_at": record.created_at,
        **{METRIC_PREFIX + name: value for name, value in score.metrics.items()},
    }
    if full:
        row["input"] = record.input
        row["target"] = record.target
        row["score_explanation"] = score.explanation
        row["messages"] = json.dumps(
            [message.model_dump(mode="json") for message in record.messages], ensure_ascii=False
        )
    return row


def _points(record: SampleResult) -> float | None:
    """The epoch's value as the fold takes it: numeric, else C=1 and I=0; None for S."""
    score = record.score
    if score.value is ScoreValue.S:
        return None
    if score.numeric is not None:
        return score.numeric
    return 1.0 if score.value is ScoreValue.C else 0.0


def _key_columns(run_key: RunKey) -> dict[str, str]:
    return {
        "run_id": run_key.run_id,
        "benchmark_id": run_key.benchmark_id,
        "model": run_key.model,
    }


def config_columns(config: str | None) -> dict[str, Any]:
    """A configuration's fields as `config.` columns, nested objects flattened with dots.

    Lists (and anything else that is not a number, a string, a boolean or null) become their
    JSON text, so every cell is a scalar a Parquet or CSV file can hold.
    """
    if config is None:
        return {}
    parsed = json.loads(config)  # JsonText: the record's contract says it parses
    if not isinstance(parsed, dict):
        return {CONFIG_PREFIX + "text": config}
    return dict(_flattened(parsed, CONFIG_PREFIX))


def _flattened(value: dict[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    for name, item in value.items():
        if isinstance(item, dict) and item:
            yield from _flattened(item, f"{prefix}{name}.")
        elif item is None or isinstance(item, str | int | float | bool):
            yield prefix + name, item
        else:
            yield (
                prefix + name,
                json.dumps(item, sort_keys=True, separators=(",", ":"), ensure_ascii=False),
            )
