"""Handler of `resultlog purge`: delete one run from the results and summaries topics."""

from __future__ import annotations

import argparse
import json
from typing import Any

from resultlog.cli._args import add_run_key, run_key_of
from resultlog.cli._connect import connect
from resultlog.consumers import purge_run
from resultlog.schemas import RunKey

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `purge` to the command line."""
    purge = commands.add_parser(
        "purge", help="delete a run: tombstones for its records and its summary"
    )
    add_run_key(purge)
    purge.add_argument("--json", action="store_true", help="print JSON")
    purge.set_defaults(handler=purge_command)


def purge_command(args: argparse.Namespace) -> int:
    """Write the tombstones, wait for their acknowledgement and say how many records went."""
    run_key = run_key_of(args)
    with connect() as kafka:
        deleted = purge_run(kafka, run_key)
    if args.json:
        print(json.dumps({**_fields(run_key), "deleted": deleted}))
    elif deleted:
        print(f"purged {run_key}: {deleted} record(s) deleted, summary deleted")
    else:
        print(f"no records of {run_key} in {kafka.results_topic}; nothing to purge")
    return 0


def _fields(run_key: RunKey) -> dict[str, str]:
    return {"run_id": run_key.run_id, "benchmark_id": run_key.benchmark_id, "model": run_key.model}
