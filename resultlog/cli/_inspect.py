"""Handlers of `resultlog inspect resume` (continue a crashed Inspect AI eval from the topic)
and `resultlog inspect import` (put Inspect logs on the topic)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from resultlog.cli._args import add_run_key_part
from resultlog.cli._connect import connect
from resultlog.errors import CliError

if TYPE_CHECKING:
    from resultlog.producer.inspect import ImportedRun, ResumedTask

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `inspect resume` and `inspect import` to the command line."""
    inspect = commands.add_parser("inspect", help="the Inspect AI plugin")
    actions = inspect.add_subparsers(dest="inspect_command", required=True, metavar="ACTION")
    resume = actions.add_parser(
        "resume",
        help="rebuild an eval's Inspect log from the topic and continue it (eval-retry)",
    )
    add_run_key_part(
        resume,
        "run_id",
        help="the eval's run id (its --metadata resultlog_run=NAME, or RESULTLOG_RUN_ID)",
    )
    resume.add_argument(
        "--log-dir",
        default=os.environ.get("INSPECT_LOG_DIR", "./logs"),
        help="where the rebuilt and the new Inspect logs go (default: $INSPECT_LOG_DIR or ./logs)",
    )
    resume.add_argument(
        "--task-file",
        help="the task file (default: the eval's, relative to the directory it ran in)",
    )
    resume.add_argument(
        "--accept-config-change",
        action="store_true",
        help="reuse durable records made under another configuration as they are",
    )
    resume.add_argument("--json", action="store_true", help="print JSON (Inspect's to stderr)")
    resume.set_defaults(handler=resume_command)
    _register_import(actions)


def _register_import(actions: argparse._SubParsersAction[Any]) -> None:
    imported = actions.add_parser(
        "import",
        help="put Inspect logs (finished or not) on the topic, as the plugin would have",
        description=(
            "Each (sample, epoch) of each log becomes the record the plugin would have "
            "written. Pairs the topic holds already are left alone, so importing twice writes "
            "nothing; a pair whose durable record holds another answer, score or "
            "configuration stops the import before anything is written."
        ),
    )
    imported.add_argument(
        "logs", nargs="+", metavar="LOG_OR_DIR", help="Inspect logs, or directories of them"
    )
    add_run_key_part(
        imported,
        "run_id",
        required=False,
        help="the run to import into (default: each eval's resultlog_run metadata, else "
        "RESULTLOG_RUN_ID, else its eval id)",
    )
    imported.add_argument(
        "--dry-run", action="store_true", help="say what would be written; write nothing"
    )
    imported.add_argument("--json", action="store_true", help="print JSON")
    imported.set_defaults(handler=import_command)


def import_command(args: argparse.Namespace) -> int:
    """Import the logs; print what each run key got."""
    import_logs = _plugin().import_logs
    say = _progress_line if not args.json else None
    # stdout is ours alone: what Inspect prints (its hooks banner) goes to stderr.
    with connect() as kafka, contextlib.redirect_stdout(sys.stderr):
        runs = import_logs(
            kafka,
            args.logs,
            run_id=args.run_id,
            dry_run=args.dry_run,
            on_log=say,
            on_written=None if say is None else _written_line,
        )
    if args.json:
        print(json.dumps([_imported_json(run) for run in runs]))
        return 0
    verb = "would write" if args.dry_run else "wrote"
    for run in runs:
        print(
            f"{run.run_key}: {verb} {run.written} pair(s) ({run.degraded} degraded), "
            f"{run.durable} held already, from {len(run.logs)} log(s)"
        )
    return 0


def _progress_line(line: str) -> None:
    print(f"resultlog: {line}", file=sys.stderr, flush=True)


def _written_line(done: int, total: int) -> None:
    _progress_line(f"written {done}/{total} pairs")


def _imported_json(run: ImportedRun) -> dict[str, Any]:
    return {
        **asdict(run.run_key),
        "written": run.written,
        "degraded": run.degraded,
        "held": run.durable,
        "logs": run.logs,
    }


def _plugin() -> Any:
    """The plugin's package; a one-line error when Inspect AI is not installed."""
    try:
        import resultlog.producer.inspect as plugin
    except ImportError as exc:
        raise CliError(
            f"the Inspect AI plugin is not installed ({exc}): install resultlog with its inspect "
            "extra, pip install '/path/to/resultlog[inspect]' (a checkout or a wheel)"
        ) from exc
    return plugin


def resume_command(args: argparse.Namespace) -> int:
    """Resume every task of the run; exit 1 unless Inspect's log of each says success."""
    resume_eval = _plugin().resume_eval
    # With --json, stdout is ours alone: what Inspect prints goes to stderr.
    quiet = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    with connect() as kafka, quiet:
        tasks = resume_eval(
            kafka,
            args.run_id,
            log_dir=args.log_dir,
            task_file=args.task_file,
            accept_config_change=args.accept_config_change,
        )
    if args.json:
        print(json.dumps([_as_json(task) for task in tasks]))
    else:
        print()  # after Inspect's display, whose last line does not end
        for task in tasks:
            print(_line(task))
    failed = [task for task in tasks if not task.succeeded]
    if failed:
        raise CliError(
            f"{len(failed)} task(s) of run {args.run_id} did not succeed: "
            f"{failed[0].run_key}: {failed[0].status} ({failed[0].error})"
        )
    return 0


def _as_json(task: ResumedTask) -> dict[str, Any]:
    fields = asdict(task)
    key = fields.pop("run_key")
    return {**key, **fields}


def _line(task: ResumedTask) -> str:
    metrics = ", ".join(f"{name}={value:.4g}" for name, value in sorted(task.metrics.items()))
    return (
        f"{task.run_key}: {task.reused} of {task.expected} pairs reused from the results log; "
        f"{task.status}; {metrics}; {task.tokens} tokens in the run ({task.session_tokens} "
        f"in this session's model calls, the figure Inspect shows); log {task.location}"
    )
