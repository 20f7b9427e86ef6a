"""Terminal output: the run's progress bar and summary table (rich, on stderr/stdout)."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

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

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
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


def print_summary(result: RunResult) -> None:
    """Print the run's summary as a table, with this run's counts and bill beside it."""
    summary = result.summary
    table = Table(title=str(summary.run_key))
    table.add_column("field")
    table.add_column("value", justify="right")
    rows: list[tuple[str, object]] = [
        ("pairs evaluated now", result.evaluated),
        ("pairs skipped (durable)", result.skipped),
        *([("pairs not started (budget)", result.unstarted)] if result.unstarted else []),
        ("records", summary.records),
        ("expected records", summary.expected_records),
        ("degraded records", summary.degraded_records),
        ("questions", summary.total_questions),
        ("correct", summary.correct_answers),
        ("skipped questions", summary.skipped_questions),
        ("accuracy", f"{summary.accuracy:.4f}"),
        *((f"metric {name}", f"{value:.4f}") for name, value in summary.metrics.items()),
        ("total tokens", summary.usage.total_tokens),
        ("spent, every attempt (USD)", f"{summary.spent_cost:.6f}"),
        ("kept, these records (USD)", f"{summary.usage.total_cost:.6f}"),
        ("spent by this run (USD)", f"{result.spent:.6f}"),
        ("saved by the resume (USD)", f"{result.saved:.6f}"),
        ("generation time (ms)", summary.generation_time_ms),
    ]
    for name, value in rows:
        table.add_row(name, str(value))
    Console().print(table)
