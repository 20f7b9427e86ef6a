"""`resultlog export`: the analysis tables as files, written whole or not at all."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from resultlog.analysis import runs_df, samples_df
from tests.resultlog.analysis.support import A, Made
from tests.support.cli import one_line_error, run_cli

_A = ("--run-id", A.run_id, "--benchmark", A.benchmark_id, "--model", A.model)


def _export(made: Made, *args: str) -> str:
    """Run `resultlog export ARGS`; the line it ends with."""
    done = run_cli(made.env, "export", *args)
    assert done.returncode == 0, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("wrote "), done.stderr
    return last


def test_a_parquet_export_reads_back_equal_to_samples_df(made: Made, tmp_path: Path) -> None:
    out = tmp_path / "a.parquet"
    said = _export(made, *_A, "--format", "parquet", "--out", str(out))
    expected = samples_df(*_A[1::2], kafka=made.settings)
    assert said == f"wrote {len(expected)} rows (the samples of 1 run key) to {out}"
    pd.testing.assert_frame_equal(pq.read_table(out).to_pandas(), expected)


def test_an_export_of_every_run_reads_back_equal(made: Made, tmp_path: Path) -> None:
    out = tmp_path / "all.parquet"
    said = _export(made, "--all", "--full", "--format", "parquet", "--out", str(out))
    expected = samples_df(full=True, kafka=made.settings)
    assert set(expected["run_id"]) == {run.run_id for run in made.runs}
    assert len(made.runs) > 1
    assert said == f"wrote {len(expected)} rows (the samples of {len(made.runs)} run keys) to {out}"
    pd.testing.assert_frame_equal(pq.read_table(out).to_pandas(), expected)
    runs = tmp_path / "runs.parquet"
    said = _export(made, "--all", "--table", "runs", "--format", "parquet", "--out", str(runs))
    every_run = runs_df(kafka=made.settings)
    assert said == f"wrote {len(every_run)} rows (one per run key) to {runs}"
    pd.testing.assert_frame_equal(pq.read_table(runs).to_pandas(), every_run)


def test_csv_and_jsonl_exports_hold_the_same_rows(made: Made, tmp_path: Path) -> None:
    expected = samples_df(*_A[1::2], kafka=made.settings)
    csv, jsonl = tmp_path / "a.csv", tmp_path / "a.jsonl"
    _export(made, *_A, "--format", "csv", "--out", str(csv))
    _export(made, *_A, "--format", "jsonl", "--out", str(jsonl))
    from_csv = pd.read_csv(csv)
    rows = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert list(from_csv.columns) == list(expected.columns) == list(rows[0])
    assert from_csv["sample_id"].tolist() == [row["sample_id"] for row in rows]
    assert from_csv["sample_id"].tolist() == expected["sample_id"].astype(str).tolist()
    assert [row["points"] for row in rows] == [
        None if pd.isna(p) else p for p in expected["points"]
    ]


def test_an_unwritable_path_is_one_line_before_anything_is_read(made: Made, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "a.parquet"
    line = one_line_error(
        run_cli(made.env, "export", *_A, "--format", "csv", "--out", str(missing))
    )
    assert "no directory" in line and str(missing) in line
    line = one_line_error(
        run_cli(made.env, "export", *_A, "--format", "csv", "--out", str(tmp_path))
    )
    assert "is a directory" in line


def test_an_unknown_run_is_one_line_and_writes_nothing(made: Made, tmp_path: Path) -> None:
    out = tmp_path / "x.parquet"
    args = ("--run-id", "nope", "--benchmark", "arith", "--model", "m")
    line = one_line_error(
        run_cli(made.env, "export", *args, "--format", "parquet", "--out", str(out))
    )
    assert "nope" in line and "no records" in line
    assert list(tmp_path.iterdir()) == []
    line = one_line_error(
        run_cli(made.env, "export", "--run-id", "x", "--format", "csv", "--out", str(out))
    )
    assert "--benchmark" in line and "--all" in line


def test_without_the_analysis_extra_export_says_what_to_install(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker" / "pandas"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no pandas here', name='pandas')\n")
    env = {**os.environ, "PYTHONPATH": str(blocker.parent)}
    args = ("--all", "--format", "csv", "--out", str(tmp_path / "x.csv"))
    line = one_line_error(run_cli(env, "export", *args))
    assert "pip install '/path/to/resultlog[analysis]'" in line and "pandas" in line
    assert not (tmp_path / "x.csv").exists()


def test_the_written_line_counts_in_words() -> None:
    from resultlog.cli._export import _written

    assert _written(1, "samples", 1) == "1 row (the samples of 1 run key)"
    assert _written(300, "samples", 2) == "300 rows (the samples of 2 run keys)"
    assert _written(1, "runs", 1) == "1 row (one per run key)"
