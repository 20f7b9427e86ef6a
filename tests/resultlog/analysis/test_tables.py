"""runs_df, samples_df and compare_df against `replay --json` and `GET /compare`, on runs made
by `resultlog run` and by `inspect eval` on a real broker."""

from __future__ import annotations

import json
from fractions import Fraction
from functools import partial
from typing import Any

import httpx
import pandas as pd
import pytest

from resultlog.analysis import AnalysisError, compare_df, runs_df, samples_df
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, encode_run_key
from tests.resultlog.analysis.support import INSPECT, SHRUNK, A, B, Made
from tests.support.aggregator import path, serving_aggregator
from tests.support.cli import printed_json, run_cli
from tests.support.waiting import wait_for

_COUNTS = (
    "records",
    "expected_records",
    "degraded_records",
    "total_questions",
    "correct_answers",
    "skipped_questions",
    "out_of_shape",
    "generation_time_ms",
)


def _replayed(made: Made, run_key: RunKey) -> dict[str, Any]:
    done = run_cli(
        made.env,
        "replay",
        "--run-id",
        run_key.run_id,
        "--benchmark",
        run_key.benchmark_id,
        "--model",
        run_key.model,
        "--json",
    )
    return printed_json(done)


def test_runs_df_equals_replay_for_every_run(made: Made) -> None:
    runs = runs_df(kafka=made.settings)
    keys = [RunKey(*row) for row in runs[["run_id", "benchmark_id", "model"]].astype(str).values]
    assert keys == sorted(made.runs)
    for row in runs.to_dict("records"):
        replayed = _replayed(made, RunKey(row["run_id"], row["benchmark_id"], row["model"]))
        for name in _COUNTS:
            expected = replayed[name]
            assert (None if pd.isna(row[name]) else row[name]) == expected, name
        assert row["accuracy"] == replayed["accuracy"]  # the same float, bit for bit
        assert row["spent_cost"] == replayed["spent_cost"]
        for name, value in replayed["usage"].items():
            assert row[name] == value, name
        for name, value in replayed["metrics"].items():
            assert row[f"metric.{name}"] == value, name
        assert row["accuracy_ci_low"] <= row["accuracy"] <= row["accuracy_ci_high"]
    assert runs.set_index("run_id").loc["shrunk", "out_of_shape"] == 20


def test_samples_df_counts_and_accuracy_equal_replay_for_every_run(made: Made) -> None:
    everything = samples_df(kafka=made.settings)
    assert set(everything["run_id"].unique()) == {"demo", "shrunk", "insp"}
    for run_key in made.runs:
        replayed = _replayed(made, run_key)
        table = samples_df(*_parts(run_key), kafka=made.settings)
        assert len(table) == replayed["records"] + replayed["out_of_shape"]
        shaped = table[table["in_shape"]]
        assert len(shaped) == replayed["records"]
        assert int(shaped["degraded"].sum()) == replayed["degraded_records"]
        assert int(shaped["total_tokens"].sum()) == replayed["usage"]["total_tokens"]
        values = _sample_values(shaped)
        assert len(values) == replayed["total_questions"]
        assert sum(1 for v in values.values() if 2 * v >= 1) == replayed["correct_answers"]
        assert float(sum(values.values(), Fraction(0)) / len(values)) == replayed["accuracy"]
        mine = everything[everything["run_id"] == run_key.run_id]
        mine = mine[mine["model"] == run_key.model].reset_index(drop=True)
        pd.testing.assert_frame_equal(
            mine.drop(columns=_empty_metrics(mine)),
            table.drop(columns=_empty_metrics(table)),
            check_categorical=False,
        )


def _parts(run_key: RunKey) -> tuple[str, str, str]:
    return run_key.run_id, run_key.benchmark_id, run_key.model


def _empty_metrics(table: pd.DataFrame) -> list[str]:
    """Metric columns no row of this table has (another run's metrics)."""
    return [c for c in table.columns if c.startswith("metric.") and table[c].isna().all()]


def _sample_values(shaped: pd.DataFrame) -> dict[str, Fraction]:
    """Each sample's value by the fold's rule: the mean of its epochs that are not S."""
    found: dict[str, list[Fraction]] = {}
    skipped: set[str] = set()
    for sample_id, points in zip(shaped["sample_id"], shaped["points"], strict=True):
        if pd.isna(points):
            skipped.add(str(sample_id))
        else:
            found.setdefault(str(sample_id), []).append(Fraction(float(points)))
    return {k: sum(v, Fraction(0)) / len(v) for k, v in found.items()}


def test_compare_df_equals_get_compare(made: Made) -> None:
    pairs = [(A, B), (B, A), (A, SHRUNK), (INSPECT, A)]
    tables = {pair: compare_df(*pair, kafka=made.settings) for pair in pairs}
    assert len(tables[(A, B)]) == 24 and tables[(A, B)]["flip"].notna().any()
    with serving_aggregator(made.settings) as (_, base_url):
        for run_key in made.runs:
            wait_for(partial(_served, base_url, run_key), f"the summary of {run_key}")
        for (a, b), table in tables.items():
            query = f"a={encode_run_key(a).decode()}&b={encode_run_key(b).decode()}"
            served = httpx.get(f"{base_url}/compare?{query}", timeout=30).json()
            samples = served.pop("samples")
            assert _rows(table) == samples  # floats compared as floats: bit for bit
            assert json.loads(json.dumps(table.attrs)) == served


def _rows(table: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {
            "sample_id": str(row["sample_id"]),
            "a": row["a"],
            "b": row["b"],
            "difference": row["difference"],
            "flip": None if pd.isna(row["flip"]) else str(row["flip"]),
        }
        for row in table.to_dict("records")
    ]


def _served(base_url: str, run_key: RunKey) -> bool:
    return httpx.get(base_url + path(run_key), timeout=5).status_code == 200


def test_compare_df_refuses_runs_of_two_benchmarks(made: Made) -> None:
    with pytest.raises(AnalysisError, match="one benchmark"):
        compare_df(A, RunKey("demo", "other", "m"), kafka=made.settings)


def test_an_unknown_run_is_one_clear_error(made: Made) -> None:
    with KafkaConnection(made.settings) as kafka, pytest.raises(AnalysisError, match="no records"):
        samples_df("nope", "arith", "m", kafka=kafka)
    assert runs_df(run_id="nope", kafka=made.settings).empty  # a filter, not a name


def test_samples_df_of_several_runs_named_by_runs_df(made: Made) -> None:
    runs = runs_df(benchmark="arith", run_id="demo", kafka=made.settings)
    table = samples_df(runs=runs, full=True, kafka=made.settings)
    assert sorted(table["model"].unique()) == [A.model, B.model]
    assert len(table) == 2 * 24 * 2
    assert table["input"].str.startswith("What is").all()
    assert all(isinstance(json.loads(text), list) for text in table["messages"])
    assert str(table["created_at"].dtype) == "datetime64[us, UTC]"
    assert isinstance(table["run_id"].dtype, pd.CategoricalDtype)
