"""The fault table of the documentation: one row per fault test, with its last outcome.

`tests/faults/conftest.py` collects a `FaultRow` per test while the whole fault tier runs
(`make test-faults`) and writes `fault_table(...)` to docs/_generated/faults.md, which the
Faults page includes; nobody edits that file by hand.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FAULT_TIER",
    "FaultRow",
    "fault_table",
    "summary_line",
    "what_it_checks",
    "write_fault_table",
]

TABLE = Path(__file__).resolve().parents[2] / "docs" / "_generated" / "faults.md"
FAULT_TIER = "faults"
"""`make test-faults`'s marker expression (the Makefile's FAULT_TIER)."""


@dataclass(frozen=True)
class FaultRow:
    """One fault test: where it is, what it checks, how it ended and how long its call took."""

    nodeid: str
    checks: str
    outcome: str
    seconds: float


def what_it_checks(function: object) -> str:
    """The first sentence of a test's docstring (its module's when it has none)."""
    doc = inspect.getdoc(function) or inspect.getdoc(inspect.getmodule(function)) or ""
    first = " ".join(doc.split("\n\n")[0].split())
    return first or "(no docstring)"


def summary_line(rows: Sequence[FaultRow]) -> str:
    """`N passed, N failed, N skipped` over the rows (outcomes in a fixed order)."""
    counts = Counter(row.outcome for row in rows)
    order = ["passed", "failed", "skipped", *sorted(set(counts) - {"passed", "failed", "skipped"})]
    return ", ".join(f"{counts[outcome]} {outcome}" for outcome in order if counts[outcome])


def fault_table(rows: Sequence[FaultRow], context: str) -> str:
    """The table as Markdown: a line of context, the counts, then one row per test."""
    lines = [
        "<!-- Written by the fault tier (make test-faults, tests/faults/conftest.py); "
        "do not edit. -->",
        "",
        f"{context} Outcome: {summary_line(rows) or 'no fault test ran'}.",
        "",
        "| test | what it checks | outcome | time |",
        "| --- | --- | --- | --- |",
    ]
    for row in sorted(rows, key=lambda row: row.nodeid):
        test = row.nodeid.removeprefix("tests/faults/")
        checks = row.checks.replace("|", "\\|")
        lines.append(f"| `{test}` | {checks} | {row.outcome} | {row.seconds:.1f} s |")
    return "\n".join(lines) + "\n"


def write_fault_table(rows: Sequence[FaultRow], context: str, out: Path = TABLE) -> None:
    """Write the table whole (a temporary file renamed), so no reader sees half of it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.write_text(fault_table(rows, context), encoding="utf-8")
    partial.replace(out)
