"""Handler of `resultlog export`: a run's samples, or every run's, as a Parquet, CSV or JSONL file.

pandas and pyarrow (the `analysis` extra) are imported when the command runs, never by the
rest of the command line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from resultlog.cli._args import add_run_key, run_key_of
from resultlog.cli._connect import connect
from resultlog.errors import CliError

__all__ = ["register"]

_FORMATS = ("parquet", "csv", "jsonl")
_TABLES = ("samples", "runs")


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `export` to the command line."""
    export = commands.add_parser(
        "export", help="write runs or samples to a Parquet, CSV or JSONL file"
    )
    add_run_key(export, required=False)
    export.add_argument(
        "--all", action="store_true", help="every run (narrowed by any run key option given)"
    )
    export.add_argument("--format", required=True, choices=_FORMATS, help="the file's format")
    export.add_argument(
        "--out",
        required=True,
        type=Path,
        help="a regular file (replaced atomically), a FIFO or character device (written "
        "straight), - (standard output); a symlink is written through, never replaced",
    )
    export.add_argument(
        "--table",
        choices=_TABLES,
        default="samples",
        help="one row per (sample, epoch) (default) or one row per run",
    )
    export.add_argument(
        "--full", action="store_true", help="samples: add input, target, explanation, messages"
    )
    export.set_defaults(handler=export_command)


def export_command(args: argparse.Namespace) -> int:
    """Read the runs named, write their table to --out, say what was written."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    try:
        from resultlog import analysis
    except ImportError as exc:
        raise CliError(str(exc)) from exc
    if not args.all:
        run_key_of(args, alternative="--all")  # one line naming what is missing
    analysis.check_writable(args.out)  # refused before anything is read
    columns = (TextColumn("[bold]reading runs"), BarColumn(), MofNCompleteColumn())
    console = Console(stderr=True)
    # Off a terminal a bar only leaves a blank line (rich's last refresh) before `wrote ...`.
    bar = Progress(
        *columns,
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )
    with connect() as kafka, bar:
        task = bar.add_task("runs", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        if args.table == "runs":
            table = analysis.runs_df(
                args.benchmark, args.model, args.run_id, kafka=kafka, progress=advance
            )
        else:
            table = analysis.samples_df(
                args.run_id,
                args.benchmark,
                args.model,
                full=args.full,
                kafka=kafka,
                progress=advance,
            )
    analysis.write_table(table, args.out, args.format)
    runs = len(table[["run_id", "benchmark_id", "model"]].drop_duplicates())
    print(f"wrote {_written(len(table), args.table, runs)} to {args.out}", file=sys.stderr)
    return 0


def _written(rows: int, table: str, runs: int) -> str:
    """What was written, in words: `300 rows (the samples of 1 run key)`."""
    row_s = "row" if rows == 1 else "rows"
    key_s = "run key" if runs == 1 else "run keys"
    if table == "runs":
        return f"{rows} {row_s} (one per run key)"
    return f"{rows} {row_s} (the samples of {runs} {key_s})"
