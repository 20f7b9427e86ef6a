"""The benchmarks' results table: each figure's fold path, the twins' figures in their column."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks._results import Goal, Result, report, table_lines

COMPILED = "compiled (mypyc)"
TWINS = "pure Python (RESULTLOG_PURE_PYTHON=1)"
GOAL = Goal(">=", 2.0, on="ratio")


def _rows(path: Path) -> list[list[str]]:
    """The table's body rows as lists of cells, after checking its head."""
    lines = table_lines(path)
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    assert cells[0] == ["what", "ours", "twin", "baseline", "ratio", "goal", "met?"]
    return cells[2:]


def test_each_figure_records_its_fold_path(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    report(Result("replay_all, 100k", 3.0, "rec/s", fold_path=TWINS), results)
    report(Result("replay_all, 1M", 3.0, "rec/s"), results)
    first, second = (json.loads(line) for line in results.read_text().splitlines())
    assert first["fold_path"] == TWINS
    assert second["fold_path"].startswith(("compiled", "pure Python"))


def test_the_twins_figure_sits_beside_the_compiled_one(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    what = "replay_all, 100k"
    report(Result(what, 30_000.0, "rec/s", 10_000.0, "naive", GOAL, fold_path=COMPILED), results)
    report(Result("replay_all, 1M", 25_000.0, "rec/s", fold_path=COMPILED), results)
    report(Result(what, 15_000.0, "rec/s", 10_000.0, "naive", GOAL, fold_path=TWINS), results)
    rows = _rows(results)
    assert rows == [
        ["replay_all, 100k (vs naive)", "30.0k rec/s", "15.0k rec/s, 1.50x", "10.0k rec/s",
         "3.00x", "ratio >= 2x", "yes"],
        ["replay_all, 1M", "25.0k rec/s", "-", "-", "-", "-", "-"],
    ]  # fmt: skip


def test_the_goal_is_judged_on_the_compiled_figure_alone(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    what = "ingest"
    goal = Goal(">=", 60_000.0)
    report(Result(what, 50_000.0, "rec/s", goal=goal, fold_path=COMPILED), results)
    report(Result(what, 70_000.0, "rec/s", goal=goal, fold_path=TWINS), results)
    (row,) = _rows(results)
    assert row[1:3] == ["50.0k rec/s", "70.0k rec/s"]
    assert row[-1] == "NO"


def test_a_twins_figure_nothing_compiled_measured_is_a_row_of_its_own(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    report(Result("replay_all, 1M", 25_000.0, "rec/s", fold_path=COMPILED), results)
    report(Result("replay_all, 100k", 15_000.0, "rec/s", fold_path=TWINS), results)
    with results.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"what": "rebuild (twin)", "failed": "exit 1"}) + "\n")
    rows = _rows(results)
    assert [row[:3] for row in rows] == [
        ["replay_all, 1M", "25.0k rec/s", "-"],
        ["replay_all, 100k", "15.0k rec/s", "-"],
        ["rebuild (twin)", "failed", ""],
    ]
    assert rows[2][-1] == "exit 1"


def test_lines_written_before_figures_had_a_fold_path_still_read(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    old = {"what": "memory", "ours": 160.0, "unit": "B", "baseline": None, "baseline_what": ""}
    results.write_text(json.dumps(old) + "\n", encoding="utf-8")
    assert _rows(results) == [["memory", "160 B", "-", "-", "-", "-", "-"]]
