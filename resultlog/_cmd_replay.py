"""Handler of `resultlog replay`: recompute summaries from the results topic."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.progress import Progress

from resultlog._connect import codec_for, kafka_settings
from resultlog._validate import run_key_part
from resultlog.consumers import ReplayResult, publish_summaries, replay_all, replay_run
from resultlog.errors import CliError
from resultlog.schemas import Codec, RunKey

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `replay` to the command line."""
    replay = commands.add_parser("replay", help="recompute run summaries from the topic")
    replay.add_argument("--run-id", type=run_key_part("run id"))
    replay.add_argument("--benchmark", type=run_key_part("benchmark"))
    replay.add_argument("--model", type=run_key_part("model"))
    replay.add_argument("--all", action="store_true", help="every run in the topic")
    replay.add_argument("--publish", action="store_true", help="write to the summaries topic")
    replay.add_argument("--json", action="store_true", help="print JSON")
    replay.set_defaults(handler=replay_command)


def replay_command(args: argparse.Namespace) -> int:
    """Recompute one run's summary (or every run's with --all) and print it."""
    settings = kafka_settings()
    codec = codec_for(settings)
    config = settings.client_config()
    if args.all:
        result = _replay_everything(config, settings.results_topic, codec, show=not args.json)
    else:
        run_key = _run_key(args)
        result = replay_run(config, settings.results_topic, run_key, codec)
    if result.undecodable:
        reasons = ", ".join(f"{kind}: {n}" for kind, n in sorted(result.reasons.items()))
        print(
            f"resultlog: warning: {result.undecodable} undecodable record(s) ignored"
            + (f" ({reasons})" if reasons else ""),
            file=sys.stderr,
        )
    summaries = list(result.summaries.values())
    if args.publish:
        count = publish_summaries(config, settings.summaries_topic, summaries, codec)
        print(f"published {count} summaries to {settings.summaries_topic}", file=sys.stderr)
    _print(summaries, as_list=args.all, as_json=args.json)
    return 0


def _run_key(args: argparse.Namespace) -> RunKey:
    missing = [f"--{name}" for name in ("run_id", "benchmark", "model") if not getattr(args, name)]
    if missing:
        names = ", ".join(name.replace("_", "-") for name in missing)
        raise CliError(f"replay needs {names} (or --all)")
    return RunKey(args.run_id, args.benchmark, args.model)


def _replay_everything(
    config: dict[str, Any], topic: str, codec: Codec, *, show: bool
) -> ReplayResult:
    with Progress(disable=not show, transient=True) as progress:
        task = progress.add_task("replaying", total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        return replay_all(config, topic, codec, on_progress=update)


def _print(summaries: list[Any], *, as_list: bool, as_json: bool) -> None:
    if as_json and as_list:
        print(json.dumps([s.model_dump(mode="json") for s in summaries]))
    elif as_json:
        print(summaries[0].model_dump_json())
    else:
        for summary in summaries:
            usage = summary.usage
            print(
                f"{summary.run_id} / {summary.benchmark_id} / {summary.model}: "
                f"{summary.records} records ({summary.degraded_records} degraded), "
                f"accuracy {summary.accuracy:.4f} over {summary.total_questions} questions "
                f"({summary.skipped_questions} skipped), {usage.total_tokens} tokens"
            )
