"""One line per figure: ours, the baseline of the same run, the ratio, the goal; and a table.

Each benchmark prints a `Result` as one aligned line and appends it as a JSON line to the
results file (`--results FILE`, or RESULTLOG_BENCH_RESULTS); `scripts/bench.sh` prints every
line of that file as one table at the end, and writes it to the documentation's performance
page (docs/_generated/bench.md). Each Result says which fold path produced it: a figure of
the pure-Python twins whose `what` the compiled path also measured is shown in that row's
twin column, and the goal is judged on the compiled figure alone:

    .venv/bin/python -m benchmarks._results FILE [--markdown OUT --context TEXT]
"""

from __future__ import annotations

import argparse
import json
import math
import operator
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import resultlog

__all__ = ["Goal", "Result", "add_results_argument", "report", "table_lines", "write_markdown"]

ENV = "RESULTLOG_BENCH_RESULTS"
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "<": operator.lt,
    ">": operator.gt,
}
_HEAD = ("what", "ours", "twin", "baseline", "ratio", "goal", "met?")


@dataclass(frozen=True)
class Goal:
    """A bound on our figure (`on="ours"`) or on ours/baseline (`on="ratio"`)."""

    op: Literal[">=", "<=", "<", ">"]
    bound: float
    on: Literal["ours", "ratio"] = "ours"


@dataclass(frozen=True)
class Result:
    """One measured figure next to its baseline (None: there is none) and its goal."""

    what: str
    ours: float
    unit: str
    baseline: float | None = None
    baseline_what: str = ""
    goal: Goal | None = None
    note: str = ""
    # What folded: the measuring process's `resultlog.fold_path()` unless a child folded.
    fold_path: str = field(default_factory=resultlog.fold_path)

    @property
    def compiled(self) -> bool:
        """Whether the compiled fold path produced the figure."""
        return self.fold_path.startswith("compiled")

    @property
    def ratio(self) -> float | None:
        """Ours over the baseline."""
        if self.baseline is None or self.baseline == 0:
            return None
        return self.ours / self.baseline

    @property
    def met(self) -> bool | None:
        """Whether the goal holds (None: no goal, or nothing to compare)."""
        if self.goal is None:
            return None
        value = self.ours if self.goal.on == "ours" else self.ratio
        if value is None or math.isnan(value):
            return None
        return _COMPARE[self.goal.op](value, self.goal.bound)


def add_results_argument(parser: argparse.ArgumentParser) -> None:
    """`--results FILE`, defaulting to RESULTLOG_BENCH_RESULTS (none: print only)."""
    parser.add_argument(
        "--results",
        type=Path,
        default=Path(os.environ[ENV]) if os.environ.get(ENV) else None,
        help=f"append each figure as a JSON line to FILE (default: ${ENV})",
    )


def report(result: Result, results: Path | None) -> None:
    """Print the figure as one aligned line and append it to `results` when given."""
    what, ours, baseline, ratio, goal, met = _cells(result)
    print(
        f"  {what:<52} ours {ours:>14}  baseline {baseline:>14}  "
        f"ratio {ratio:>7}  goal {goal:<16} {met}",
        flush=True,
    )
    notes = [result.note] if result.note else []
    if not result.compiled:
        notes.append(f"fold path: {result.fold_path}")
    for note in notes:
        print(f"  {'':<52} ({note})")
    if results is not None:
        line = asdict(result) | {"ratio": result.ratio, "met": result.met}
        with results.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def _cells(result: Result) -> tuple[str, str, str, str, str, str]:
    ratio = result.ratio
    met = {True: "yes", False: "NO", None: "-"}[result.met]
    return (
        result.what,
        _amount(result.ours, result.unit),
        "-" if result.baseline is None else _amount(result.baseline, result.unit),
        "-" if ratio is None else f"{ratio:.2f}x",
        _goal(result.goal, result.unit),
        met,
    )


def _amount(value: float, unit: str) -> str:
    if math.isnan(value):
        return "n/a"
    if unit in {"rec/s", "pairs/s", "B/rec"} and value >= 10_000:
        return f"{value / 1000:.1f}k {unit}"
    if unit == "s":
        return f"{value:.2f} s"
    return f"{value:.0f} {unit}" if value >= 100 else f"{value:.1f} {unit}"


def _goal(goal: Goal | None, unit: str) -> str:
    if goal is None:
        return "-"
    if goal.on == "ratio":
        return f"ratio {goal.op} {goal.bound:.3g}x"
    return f"{goal.op} {_amount(goal.bound, unit)}"


def _twin_cell(twin: Result | None) -> str:
    """The twin's figure, and its ratio to its own baseline when it has one."""
    if twin is None:
        return "-"
    ratio = twin.ratio
    return _amount(twin.ours, twin.unit) + ("" if ratio is None else f", {ratio:.2f}x")


def _read(path: Path) -> list[Result | tuple[str, str]]:
    """The file's lines: a Result each, or (what, reason) for a benchmark that failed."""
    lines: list[Result | tuple[str, str]] = []
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        data = json.loads(line)
        if "failed" in data:
            lines.append((data["what"], data["failed"]))
            continue
        goal = Goal(**data["goal"]) if data.get("goal") else None
        fields = {k: data[k] for k in ("what", "ours", "unit", "baseline", "baseline_what")}
        extra = {k: data[k] for k in ("note", "fold_path") if k in data}
        lines.append(Result(**fields, goal=goal, **extra))
    return lines


def _row(result: Result, twin: Result | None) -> tuple[str, ...]:
    """A table row: the result's cells with the twin's in the twin column."""
    what = result.what + (f" (vs {result.baseline_what})" if result.baseline_what else "")
    _, ours, *rest = _cells(result)
    return (what, ours, _twin_cell(twin), *rest)


def table_lines(path: Path) -> list[str]:
    """Every result line of the file as one Markdown table (also readable in a terminal):
    the twins' figure of a `what` the compiled path measured goes in that row's twin cell."""
    found = _read(path)
    measured = {line.what for line in found if isinstance(line, Result) and line.compiled}
    twins = {
        line.what: line
        for line in found
        if isinstance(line, Result) and not line.compiled and line.what in measured
    }
    rows: list[tuple[str, ...]] = [_HEAD]
    for line in found:
        if isinstance(line, tuple):
            rows.append((line[0], "failed", "", "", "", "", line[1]))
        elif twins.get(line.what) is not line:
            rows.append(_row(line, twins.get(line.what) if line.compiled else None))
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEAD))]
    lines = []
    for n, row in enumerate(rows):
        cells = (cell.replace("|", "\\|").ljust(w) for cell, w in zip(row, widths, strict=True))
        lines.append("| " + " | ".join(cells) + " |")
        if n == 0:
            lines.append("| " + " | ".join("-" * w for w in widths) + " |")
    return lines


def print_table(path: Path) -> None:
    """Print the file's table."""
    print("\n".join(table_lines(path)))


def write_markdown(path: Path, out: Path, context: str) -> None:
    """Write the file's table to `out` (the docs' performance table) under a line of context.

    Written whole to a temporary file, then renamed, so a reader never sees half a table.
    """
    head = f"<!-- Written by scripts/bench.sh (make bench); do not edit. -->\n\n{context}\n\n"
    text = head + "\n".join(table_lines(path)) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(out)


def record_failure(path: Path, what: str, reason: str) -> None:
    """Append a line saying a benchmark did not produce its figures."""
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"what": what, "failed": reason}) + "\n")


def main() -> int:
    """`FILE`: print the table; `--markdown OUT --context TEXT`: also write it to OUT;
    `FILE --failed WHAT REASON`: record a failed benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--failed", nargs=2, metavar=("WHAT", "REASON"))
    parser.add_argument("--markdown", type=Path, metavar="OUT", help="also write the table here")
    parser.add_argument("--context", default="", help="the line written above that table")
    args = parser.parse_args()
    if args.failed:
        record_failure(args.file, *args.failed)
        return 0
    print_table(args.file)
    if args.markdown is not None:
        write_markdown(args.file, args.markdown, args.context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
