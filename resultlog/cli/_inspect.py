"""Handler of `resultlog inspect resume`: continue a crashed Inspect AI eval from the topic."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from resultlog.cli._args import run_key_part
from resultlog.cli._connect import connect
from resultlog.errors import CliError

if TYPE_CHECKING:
    from resultlog.producer.inspect import ResumedTask

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `inspect resume` to the command line."""
    inspect = commands.add_parser("inspect", help="the Inspect AI plugin")
    actions = inspect.add_subparsers(dest="inspect_command", required=True, metavar="ACTION")
    resume = actions.add_parser(
        "resume",
        help="rebuild an eval's Inspect log from the topic and continue it (eval-retry)",
    )
    resume.add_argument(
        "--run-id",
        required=True,
        type=run_key_part("run id"),
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


def resume_command(args: argparse.Namespace) -> int:
    """Resume every task of the run; exit 1 unless Inspect's log of each says success."""
    try:
        from resultlog.producer.inspect import resume_eval
    except ImportError as exc:
        raise CliError(
            f"the Inspect AI plugin is not installed ({exc}): install resultlog with its inspect "
            "extra, pip install '/path/to/resultlog[inspect]' (a checkout or a wheel)"
        ) from exc
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
