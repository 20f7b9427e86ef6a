"""Handler of `resultlog lm-eval`: lm-eval's own CLI, its model's answers durable in the log."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from resultlog._argtypes import bounded
from resultlog.cli._args import add_run_key_part
from resultlog.cli._connect import connect
from resultlog.cli._run import BUDGET_EXIT
from resultlog.errors import CliError
from resultlog.schemas import MAX_COST_USD

if TYPE_CHECKING:
    from resultlog.producer.lm_eval import Recording

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `lm-eval` to the command line."""
    parser = commands.add_parser(
        "lm-eval",
        help="run lm-evaluation-harness with every answer durable in the log",
        description="Run lm-eval's CLI with the arguments after `--` unchanged: each answered "
        "request is durable as it completes and served from the log on a rerun of the run id; "
        "each document's outcome becomes a record of the results topic.",
    )
    add_run_key_part(parser, "run_id", help="the run's id")
    parser.add_argument(
        "--budget-usd",
        type=bounded("budget", float, 0.0, MAX_COST_USD),
        default=None,
        help="ask no further request once a task's spend reaches this many USD (default: none)",
    )
    parser.add_argument(
        "--accept-config-change",
        action="store_true",
        help="reuse durable answers made under another configuration as they are",
    )
    parser.add_argument(
        "lm_eval_args",
        nargs=argparse.REMAINDER,
        metavar="-- LM_EVAL_ARGS",
        help="lm-eval's arguments (`lm-eval run`'s), after `--`",
    )
    parser.set_defaults(
        handler=lm_eval_command,
        on_interrupt="every answer so far is durable: run the same `resultlog lm-eval` command "
        "to continue (answered requests are served from the log)",
    )


def lm_eval_command(args: argparse.Namespace) -> int:
    """Run lm-eval on the log; exit with lm-eval's status, or 3 if the budget stopped it."""
    argv = list(args.lm_eval_args)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise CliError("give lm-eval's arguments after `--`, e.g. -- --model ... --tasks ...")
    try:
        from lm_eval._cli.harness import HarnessCLI
        from lm_eval.utils import setup_logging

        from resultlog.producer.lm_eval import LmEvalBudgetError, recording
    except ImportError as exc:
        raise CliError(
            f"lm-evaluation-harness is not installed ({exc}): "
            "pip install '/path/to/resultlog[lm-eval]' (a checkout or a wheel)"
        ) from exc
    setup_logging()
    harness = HarnessCLI()
    with _argv(["lm-eval", *argv]):
        parsed = harness.parse_args()  # lm-eval's parser (it inserts `run` when absent)
    if getattr(parsed, "command", None) != "run":
        raise CliError("only lm-eval's `run` can be recorded (give its arguments after `--`)")
    with (
        connect() as kafka,
        recording(
            kafka,
            args.run_id,
            budget_usd=args.budget_usd,
            accept_config_change=args.accept_config_change,
        ) as run,
    ):
        try:
            harness.execute(parsed)
        except LmEvalBudgetError as exc:
            print(f"resultlog: budget: {exc}; every answer so far is durable", file=sys.stderr)
            _report(run)
            return BUDGET_EXIT
    _report(run)
    return 0


def _report(run: Recording) -> None:
    for state in run.tasks.values():
        records = run.published.get(state.run_key, 0)
        print(
            f"resultlog: {state.run_key}: {state.reused} answer(s) served from the log, "
            f"{state.asked} asked; {records} record(s) written",
            file=sys.stderr,
        )


@contextlib.contextmanager
def _argv(argv: list[str]) -> Iterator[None]:
    saved = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = saved
