"""The soak's outcome: its closing lines and its figures page (docs/_generated/soak.md)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tests.soak.checker import Violation

__all__ = ["Outcome", "closing_line", "write_figures"]

_SOAK_DIR = re.compile(r"/\S*/resultlog-soak-[^/\s]+/")
FIGURES = Path(__file__).resolve().parents[2] / "docs" / "_generated" / "soak.md"
_RECENT = "The last soaks, newest first:"
_RUNS_HEAD = "| when | seed | duration | faults | kinds | fewest of a kind | checks | violations |"
_KEPT = 10


@dataclass
class Outcome:
    """What one soak did and found."""

    seed: int
    seconds: float
    planted: bool
    faults: Counter[str] = field(default_factory=Counter)
    checks: int = 0
    compared: int = 0
    worker_summaries: int = 0
    runs: int = 0
    finished: int = 0
    records: int = 0
    requests: int = 0
    violations: list[Violation] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    incidents: list[str] = field(default_factory=list)


def kinds_of(violations: list[Violation]) -> str:
    """How many violations of each kind, in words."""
    counts = Counter(v.kind for v in violations)
    return ", ".join(f"{kind} {count}" for kind, count in sorted(counts.items()))


def closing_line(outcome: Outcome) -> str:
    """`soak: N faults, M checks, V violations`."""
    faults = sum(outcome.faults.values())
    return f"soak: {faults} faults, {outcome.checks} checks, {len(outcome.violations)} violations"


def lines(outcome: Outcome) -> list[str]:
    """What is printed at the end, before the closing line."""
    out = [f"soak: seed {outcome.seed}, {outcome.seconds:.0f}s"]
    out += [f"  {kind}: {count}" for kind, count in sorted(outcome.faults.items())]
    out.append(
        f"  runs {outcome.runs} ({outcome.finished} finished, {outcome.records} records), "
        f"{outcome.requests} model requests, {outcome.compared} fresh summaries compared, "
        f"{outcome.worker_summaries} worker summaries compared"
    )
    if outcome.incidents:
        out.append("incidents (not violations):")
        out += [f"  {line}" for line in outcome.incidents]
    out.append("fault history:")
    out += [f"  {line}" for line in outcome.history]
    if outcome.violations:
        out.append(f"violations (seed {outcome.seed}; replay with SOAK_SEED={outcome.seed}):")
        out += [f"  {v.line()}" for v in outcome.violations]
    return out


def write_figures(outcome: Outcome, path: Path = FIGURES) -> None:
    """The figures page the docs include: the last soak's figures, then the last few soaks
    one row each (kept from the page as it was)."""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(outcome.faults.items()))
    fewest = min(outcome.faults.values(), default=0)
    run = (
        f"| {when} | {outcome.seed}{' (planted)' if outcome.planted else ''} "
        f"| {outcome.seconds:.0f} s | {sum(outcome.faults.values())} | {len(outcome.faults)} "
        f"| {fewest} | {outcome.checks} | {len(outcome.violations)} |"
    )
    earlier = _runs(path.read_text()) if path.exists() else []
    rows = [
        "<!-- Written by the last `make soak` (tests/soak/report.py); do not edit. -->",
        "",
        "| figure | value |",
        "|---|---|",
        f"| when | {when} |",
        f"| seed | {outcome.seed}{' (SOAK_PLANT=1)' if outcome.planted else ''} |",
        f"| duration | {outcome.seconds:.0f} s |",
        f"| faults | {sum(outcome.faults.values())} ({kinds or 'none'}) |",
        f"| checks (rounds that compared a fresh run) | {outcome.checks} |",
        f"| fresh summaries compared with replay | {outcome.compared} |",
        f"| worker summaries compared with replay | {outcome.worker_summaries} |",
        f"| runs written | {outcome.runs} ({outcome.finished} finished, "
        f"{outcome.records} records) |",
        f"| model requests | {outcome.requests} |",
        f"| violations | {len(outcome.violations)} ({kinds_of(outcome.violations) or 'none'}) |",
        f"| incidents (workers that failed by themselves, reads given up) | "
        f"{len(outcome.incidents)} |",
    ]
    # The soak's folder is gone (or kept only on this machine): paths are shown within it.
    shown = [_SOAK_DIR.sub("", v.line()) for v in outcome.violations]
    # A code block: a violation quotes logs whose brackets Markdown would read as links.
    rows += ["", "```text", *shown, "```"] if shown else []
    rows += ["", _RECENT, "", _RUNS_HEAD, "|---|---|---|---|---|---|---|---|"]
    rows += [run, *earlier[: _KEPT - 1]]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(rows) + "\n")


def _runs(page: str) -> list[str]:
    """The rows of the recent soaks' table on the page, newest first."""
    _, found, table = page.partition(_RUNS_HEAD)
    return [line for line in table.splitlines()[2:] if line.startswith("| ")] if found else []
