"""Terminal output: the run's progress bar and summary table (rich, on stderr/stdout)."""

from __future__ import annotations

from typing import Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from resultlog.cli._figures import usd
from resultlog.producer import Progress as RunProgress
from resultlog.producer import RunResult

__all__ = ["ProgressBar", "print_summary"]


class ProgressBar:
    """A progress bar of (sample, epoch) pairs: done now, skipped from the log, degraded."""

    def __init__(self, *, enabled: bool = True) -> None:
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("skipped from log {task.fields[skipped]}"),
            TextColumn("degraded {task.fields[degraded]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            disable=not enabled,
        )
        self._task = self._progress.add_task("pairs", total=None, skipped=0, degraded=0)

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._progress.stop()

    def update(self, progress: RunProgress) -> None:
        """Show the run's latest progress."""
        self._progress.update(
            self._task,
            total=progress.total,
            completed=progress.done + progress.skipped,
            skipped=progress.skipped,
            degraded=progress.degraded,
        )


def print_summary(result: RunResult, *, simulated_cost: bool = False) -> None:
    """Print the run's summary as a table, each row saying what it counts; with this run's
    counts and bill beside it. `simulated_cost`: the offline model's made-up prices."""
    summary = result.summary
    table = Table(title=str(summary.run_key))
    table.add_column("field")
    table.add_column("value", justify="right")
    unit = "USD, simulated" if simulated_cost else "USD"
    correct = f"{summary.correct_answers} of {summary.total_questions}"
    rows: list[tuple[str, object]] = [
        ("pairs evaluated now", result.evaluated),
        ("pairs skipped (durable already)", result.skipped),
        *([("pairs not started (budget)", result.unstarted)] if result.unstarted else []),
        ("records: (sample, epoch) pairs in the log", summary.records),
        ("expected records", summary.expected_records),
        ("degraded records: model call failed, retried on resume", summary.degraded_records),
        ("questions scored", summary.total_questions),
        ("correct: questions scoring >= 0.5 over their epochs", correct),
        ("skipped questions: every epoch degraded", summary.skipped_questions),
        ("accuracy: mean of the questions' scores", f"{summary.accuracy:.4f}"),
        *(
            (f"metric {name}: mean over scored records", f"{value:.4f}")
            for name, value in summary.metrics.items()
        ),
        ("total tokens", summary.usage.total_tokens),
        (f"spent, every attempt ({unit})", usd(summary.spent_cost)),
        (f"kept, these records ({unit})", usd(summary.usage.total_cost)),
        (f"spent by this run ({unit})", usd(result.spent)),
        (f"saved by the resume ({unit})", usd(result.saved)),
        ("generation time, summed over records (ms)", summary.generation_time_ms),
    ]
    for name, value in rows:
        table.add_row(name, str(value))
    if simulated_cost:
        table.caption = "the offline model server bills made-up prices: no money was spent"
    Console().print(table)
