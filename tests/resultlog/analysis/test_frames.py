"""Pure parts of resultlog.analysis: rows, column types, atomic writes (no broker)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from resultlog.analysis import (
    FULL_COLUMNS,
    RUN_COLUMNS,
    SAMPLE_COLUMNS,
    AnalysisError,
    write_table,
)
from resultlog.analysis._frames import frame
from resultlog.analysis._rows import ReadRun, config_columns, sample_row
from resultlog.consumers import RunRecords, fold_records
from resultlog.schemas import RunKey
from tests.support.imports import modules_loaded_by
from tests.support.records import RUN_KEY, make_record


def _run(*records: object) -> ReadRun:
    return ReadRun(RUN_KEY, RunRecords(list(records), 0))  # type: ignore[arg-type]


def test_the_command_line_never_imports_pandas() -> None:
    loaded = modules_loaded_by("resultlog.cli")
    assert not {"pandas", "pyarrow", "resultlog.analysis"} & loaded


def test_empty_tables_have_every_fixed_column_in_its_type() -> None:
    for columns in (RUN_COLUMNS, SAMPLE_COLUMNS):
        table = frame([], columns)
        assert list(table.columns) == list(columns)
        assert [str(t) for t in table.dtypes] == list(columns.values())


def test_a_sample_row_types_ids_as_categories_counts_as_nullable_ints_times_in_utc() -> None:
    run = _run(
        make_record(0, 0, "C", metrics={"reward": 1.0}),
        make_record(0, 1, "S", degraded=True),
        make_record(1, 0, "I", numeric=0.25),
    )
    table = frame(run.sample_rows(full=True), SAMPLE_COLUMNS, FULL_COLUMNS)
    assert list(table.columns) == [*SAMPLE_COLUMNS, "metric.reward", *FULL_COLUMNS]
    assert isinstance(table["sample_id"].dtype, pd.CategoricalDtype)
    assert str(table["input_tokens"].dtype) == "Int64"
    assert table["input_tokens"].isna().tolist() == [False, True, False]  # degraded: no usage
    assert str(table["created_at"].dtype) == "datetime64[us, UTC]"
    assert table["points"].tolist()[0] == 1.0 and pd.isna(table["points"].tolist()[1])
    assert table["points"].tolist()[2] == 0.25  # numeric wins over I
    assert table["error_kind"].tolist()[1] == "model_error"
    assert table["http_status"].tolist()[1] == 429
    assert pd.isna(table["metric.reward"].tolist()[2])
    assert json.loads(table["messages"].tolist()[0]) == []


def test_a_run_row_is_the_folds_summary() -> None:
    records = [make_record(i, e, "CI"[(i + e) % 2]) for i in range(5) for e in range(3)]
    run = _run(*records)
    row = run.run_row()
    summary = fold_records(records, RUN_KEY)
    assert row["accuracy"] == summary.accuracy
    assert row["records"] == summary.records and row["total_cost"] == summary.usage.total_cost
    low, high = row["accuracy_ci_low"], row["accuracy_ci_high"]
    assert low < row["accuracy"] < high
    assert row["first_record_at"] == row["last_record_at"] == records[0].created_at


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from("CIS"), min_size=1, max_size=12))
def test_points_averaged_per_sample_give_the_folds_accuracy(values: list[str]) -> None:
    records = [make_record(i // 2, i % 2, v, epochs=2) for i, v in enumerate(values)]
    table = frame(_run(*records).sample_rows(full=False), SAMPLE_COLUMNS)
    per_sample: dict[str, list[Fraction]] = {}
    for sample_id, points in zip(table["sample_id"], table["points"], strict=True):
        if not pd.isna(points):
            per_sample.setdefault(str(sample_id), []).append(Fraction(float(points)))
    means = [sum(v, Fraction(0)) / len(v) for v in per_sample.values()]
    expected = float(sum(means, Fraction(0)) / len(means)) if means else 0.0
    assert expected == fold_records(records, RUN_KEY).accuracy


def test_config_fields_are_flattened_and_lists_kept_as_json() -> None:
    config = '{"format":1,"generation":{"temperature":0.5},"tags":["a","b"],"base_url":null}'
    assert config_columns(config) == {
        "config.format": 1,
        "config.generation.temperature": 0.5,
        "config.tags": '["a","b"]',
        "config.base_url": None,
    }
    assert config_columns(None) == {}
    assert config_columns("[1]") == {"config.text": "[1]"}


def test_config_columns_of_mixed_kinds_become_text() -> None:
    rows = [
        {**dict.fromkeys(RUN_COLUMNS), "run_id": "r", "config.x": 1, "config.y": True},
        {**dict.fromkeys(RUN_COLUMNS), "run_id": "s", "config.x": "one", "config.y": None},
    ]
    table = frame(rows, RUN_COLUMNS)
    assert table["config.x"].tolist() == ["1", "one"]
    assert str(table["config.y"].dtype) == "boolean"


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_write_table_replaces_the_file_whole(tmp_path: Path, fmt: str) -> None:
    table = frame(
        _run(make_record(0, 0), make_record(1, 0)).sample_rows(full=False), SAMPLE_COLUMNS
    )
    target = tmp_path / f"out.{fmt}"
    target.write_text("old")
    write_table(table, target, fmt)
    assert [p.name for p in tmp_path.iterdir()] == [target.name]  # no temporary file left
    if fmt == "parquet":
        pd.testing.assert_frame_equal(pq.read_table(target).to_pandas(), table)
    elif fmt == "csv":
        assert pd.read_csv(target)["sample_id"].tolist() == ["q0", "q1"]
    else:
        rows = [json.loads(line) for line in target.read_text().splitlines()]
        assert [pd.Timestamp(row["created_at"]) for row in rows] == list(table["created_at"])
        assert [row["sample_id"] for row in rows] == ["q0", "q1"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.parquet"
    target.write_text("old")
    unwritable = pd.DataFrame({"x": [1, "a"]})  # pyarrow refuses mixed objects
    with pytest.raises(Exception, match="x"):
        write_table(unwritable, target, "parquet")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]


def test_write_table_refuses_a_path_it_cannot_write(tmp_path: Path) -> None:
    table = frame([], SAMPLE_COLUMNS)
    with pytest.raises(AnalysisError, match="no directory"):
        write_table(table, tmp_path / "missing" / "out.csv", "csv")
    with pytest.raises(AnalysisError, match="is a directory"):
        write_table(table, tmp_path, "csv")
    with pytest.raises(AnalysisError, match="unknown format"):
        write_table(table, tmp_path / "out.xls", "xls")


def test_a_run_key_of_sample_rows_is_the_records() -> None:
    record = make_record(3, 1, run_key=RunKey("r", "b", "m"))
    row = sample_row(record, in_shape=False, full=False)
    assert (row["run_id"], row["benchmark_id"], row["model"]) == ("r", "b", "m")
    assert row["in_shape"] is False and "input" not in row
