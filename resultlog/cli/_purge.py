"""Handler of `resultlog purge`: delete one run from the results and summaries topics."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from resultlog.cli._args import add_run_key, run_key_of
from resultlog.cli._connect import connect
from resultlog.errors import CliError

if TYPE_CHECKING:
    from resultlog.kafka import KafkaConnection
    from resultlog.producer import PurgePlan
    from resultlog.schemas import RunKey

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `purge` to the command line."""
    purge = commands.add_parser(
        "purge", help="delete a run: tombstones for its records and its summary"
    )
    add_run_key(purge)
    purge.add_argument("--json", action="store_true", help="print JSON")
    purge.add_argument("--yes", action="store_true", help="delete without asking (for scripts)")
    purge.add_argument("--dry-run", action="store_true", help="only count what would be deleted")
    purge.add_argument(
        "--force",
        action="store_true",
        help="take over the lease of a writer of the run (it stops writing), then purge",
    )
    purge.set_defaults(handler=purge_command)


def purge_command(args: argparse.Namespace) -> int:
    """Count, confirm, write the tombstones, wait for their acknowledgement and say so."""
    from resultlog.producer import PurgeLeasedError, execute_purge, plan_purge

    run_key = run_key_of(args)
    with connect() as kafka:
        plan = plan_purge(kafka, run_key)
        if plan.holders and not args.force:
            raise PurgeLeasedError(run_key, plan.holders[0])
        if args.dry_run:
            return _dry_run(args, kafka, plan)
        if plan.records and not args.yes:
            _confirm(kafka, plan)
        deleted = execute_purge(kafka, plan, force=args.force)
    if args.json:
        print(json.dumps({**_fields(run_key), "deleted": deleted}))
    elif deleted:
        print(f"purged {run_key}: {deleted} record(s) deleted, summary deleted")
    else:
        print(f"no records of {run_key} in {kafka.results_topic}; nothing to purge")
    return 0


def _what(kafka: KafkaConnection, plan: PurgePlan) -> str:
    """What the purge deletes, in words."""
    return (
        f"{plan.records} record(s) of {plan.run_key} in {kafka.results_topic} "
        f"(partition {plan.partition}) and its summary in {kafka.summaries_topic}"
    )


def _dry_run(args: argparse.Namespace, kafka: KafkaConnection, plan: PurgePlan) -> int:
    if args.json:
        print(json.dumps({**_fields(plan.run_key), "would_delete": plan.records}))
    else:
        print(f"would delete {_what(kafka, plan)}")
    return 0


def _confirm(kafka: KafkaConnection, plan: PurgePlan) -> None:
    """Ask on a terminal; refuse in one line anywhere else (scripts pass --yes)."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        raise CliError(
            f"purge would delete {_what(kafka, plan)}: pass --yes to confirm "
            f"(--dry-run only counts)"
        )
    print(f"This deletes {_what(kafka, plan)}.", file=sys.stderr)
    try:
        answer = input("Delete it? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        raise CliError("purge cancelled: nothing deleted")


def _fields(run_key: RunKey) -> dict[str, str]:
    return {"run_id": run_key.run_id, "benchmark_id": run_key.benchmark_id, "model": run_key.model}
