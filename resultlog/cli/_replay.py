"""Handler of `resultlog replay`: recompute summaries from the results topic."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from resultlog.cli._args import add_run_key, run_key_of
from resultlog.cli._connect import connect
from resultlog.cli._figures import json_text
from resultlog.errors import CliError

if TYPE_CHECKING:
    from resultlog.consumers import ReplayResult
    from resultlog.kafka import KafkaConnection
    from resultlog.schemas import RunKey, RunSummary

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `replay` to the command line."""
    replay = commands.add_parser("replay", help="recompute run summaries from the topic")
    add_run_key(replay, required=False)
    replay.add_argument("--all", action="store_true", help="every run in the topic")
    replay.add_argument("--publish", action="store_true", help="write to the summaries topic")
    replay.add_argument("--json", action="store_true", help="print JSON")
    replay.set_defaults(handler=replay_command)


def replay_command(args: argparse.Namespace) -> int:
    """Recompute one run's summary (or every run's with --all) and print it."""
    from resultlog.consumers import replay_run

    with connect() as kafka:
        if args.all:
            result = _replay_everything(kafka, show=not args.json)
        else:
            run_key = run_key_of(args, alternative="--all")
            result = replay_run(kafka, run_key)
            _refuse_empty(result, run_key, kafka.results_topic)
        _warn_undecodable(result)
        summaries = list(result.summaries.values())
        refused = _publish(kafka, result) if args.publish else ()
    _print(summaries, as_list=args.all, as_json=args.json)
    if refused:
        more = f" and {len(refused) - 1} more" if len(refused) > 1 else ""
        raise CliError(
            f"not published: {refused[0]}{more} has records that could not be read, so its "
            "summary would miss them; fix or purge them, then publish again"
        )
    return 0


def _publish(kafka: KafkaConnection, result: ReplayResult) -> tuple[RunKey, ...]:
    """Publish what may be published; return the runs refused for unreadable records."""
    from resultlog.consumers import publish_replayed

    report = publish_replayed(kafka, result)
    print(report.describe(kafka.summaries_topic), file=sys.stderr)
    return report.unreadable


def _refuse_empty(result: ReplayResult, run_key: RunKey, topic: str) -> None:
    """A run without records is a mistyped key or a purged run: an error, not a zero summary."""
    if result.records:
        return
    unreadable = f" ({result.undecodable} undecodable)" if result.undecodable else ""
    raise CliError(f"run {run_key} has no records in {topic}{unreadable}")


def _warn_undecodable(result: ReplayResult) -> None:
    if result.undecodable:
        reasons = ", ".join(f"{kind}: {n}" for kind, n in sorted(result.reasons.items()))
        print(
            f"resultlog: warning: {result.undecodable} undecodable record(s) ignored"
            + (f" ({reasons})" if reasons else ""),
            file=sys.stderr,
        )


def _replay_everything(kafka: KafkaConnection, *, show: bool) -> ReplayResult:
    from rich.progress import Progress

    from resultlog.consumers import replay_all

    with Progress(disable=not show, transient=True) as progress:
        task = progress.add_task("replaying", total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        return replay_all(kafka, on_progress=update)


def _print(summaries: list[RunSummary], *, as_list: bool, as_json: bool) -> None:
    if as_json and as_list:
        print(json_text([s.model_dump(mode="json") for s in summaries]))
    elif as_json:
        print(summaries[0].model_dump_json())
    else:
        for summary in summaries:
            usage = summary.usage
            print(
                f"{summary.run_key}: "
                f"{summary.records} records ({summary.degraded_records} degraded), "
                f"accuracy {summary.accuracy:.4f} over {summary.total_questions} questions "
                f"({summary.skipped_questions} skipped), {usage.total_tokens} tokens"
            )
