"""Handler of `resultlog status`: the resume view of a run key."""

from __future__ import annotations

import argparse
import json
from typing import Any

from resultlog.cli._args import add_epochs, add_group, add_run_key, run_key_of
from resultlog.cli._connect import connect
from resultlog.cli._figures import json_text, usd
from resultlog.errors import CliError

__all__ = ["register"]

# What the counted fields mean, printed beside them (the JSON keeps bare numbers).
MEANINGS = {
    "records": "(sample, epoch) pairs in the log, the newest record of each",
    "expected_records": "pairs the run's shape asks for",
    "completed": "pairs durable and not degraded",
    "degraded": "pairs whose model call failed: a re-run asks them again",
    "skip_list": "pairs a re-run skips: the completed ones within the epochs asked",
    "out_of_range": "pairs outside the epochs asked: ignored",
    "undecodable": "records that could not be decoded (dead-lettered by the aggregator)",
    "spent_cost": "USD of every model call so far, retries included",
}


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `status` to the command line."""
    status = commands.add_parser(
        "status",
        help="the resume view of a run",
        description="What a re-run of the run key would skip and what it would ask again.",
    )
    add_run_key(status)
    add_epochs(
        status,
        default=None,
        help="the epochs a re-run would use (default: the run's, from its newest record)",
    )
    add_group(status, help="the worker group whose chunks to show (default: RESULTLOG_WORK_GROUP)")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(handler=status_command)


def status_command(args: argparse.Namespace) -> int:
    """Print what a re-run would skip and what it would evaluate again."""
    from resultlog.consumers import run_status

    run_key = run_key_of(args)
    with connect() as kafka:
        found = run_status(kafka, run_key, args.epochs, args.group)
        topic = kafka.results_topic
    if not found.records and not found.undecodable and found.chunks is None:
        # A mistyped key or a purged run: zeros would look like a run whose records vanished.
        raise CliError(f"run {run_key} has no records in {topic}")
    view = found.as_json()
    if args.json:
        print(json_text(view))
        return 0
    chunks, config = view.pop("chunks"), view.pop("config")
    lines = [(name, _text(name, value)) for name, value in view.items()]
    if isinstance(config, dict):
        lines += _config_lines(config)
    width = max(len(name) for name, _ in lines)
    for name, value in lines:
        meaning = f"  ({MEANINGS[name]})" if name in MEANINGS else ""
        print(f"{name:>{width}}: {value}{meaning}")
    if isinstance(chunks, dict):
        _print_chunks(chunks)
    return 0


def _text(name: str, value: object) -> str:
    """A field's value for people: a sum of money by the one rule for sums."""
    return usd(value) if name == "spent_cost" and isinstance(value, float) else str(value)


def _print_chunks(chunks: dict[str, Any]) -> None:
    """One line of counts, then a line per chunk."""
    states = ("done", "failed", "stopped", "running", "waiting")
    counts = ", ".join(f"{state} {chunks[state]}" for state in states)
    print(f"{'chunks':>16}: {chunks['total']} ({counts}; group {chunks['group']})")
    for chunk in chunks["list"]:
        where = f"[{chunk['start']}, {chunk['end']})"
        progress = f"{chunk['records']}/{chunk['expected']} records"
        print(f"{'chunk ' + str(chunk['chunk_index']):>16}: {chunk['state']:<8} {where} {progress}")


def _config_lines(config: dict[str, Any], prefix: str = "config.") -> list[tuple[str, str]]:
    """The run's configuration, a line per field (nested fields as dotted names)."""
    lines: list[tuple[str, str]] = []
    for name, value in config.items():
        if isinstance(value, dict):
            lines += _config_lines(value, f"{prefix}{name}.")
        else:
            lines.append((prefix + name, json.dumps(value)))
    return lines
