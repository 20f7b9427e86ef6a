"""Handler of `resultlog rescore`: score a run's stored answers again, as a new run."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from resultlog._argtypes import bounded
from resultlog.cli._args import add_concurrency, add_run_key, run_key_of, run_key_part

if TYPE_CHECKING:
    from resultlog.producer.rescore import RescoreResult

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `rescore` to the command line."""
    rescore = commands.add_parser(
        "rescore",
        help="score a run's stored answers again, as a new run (no model call)",
        description=(
            "Read the run's latest records, apply --scorer to each stored answer and write "
            "them as run --as (same benchmark and model): the answers, usage and bill are the "
            "source's, only the score is new. Degraded records stay degraded; records without "
            "a stored answer are counted, not guessed. A run still being written (its lease "
            "held) is refused, or waited for with --wait. The same command again resumes it."
        ),
    )
    add_run_key(rescore)
    rescore.add_argument(
        "--scorer",
        required=True,
        help="exact, includes, match, pattern:REGEX, numeric[:TOLERANCE], graded (asks "
        "--grader-model), or an Inspect AI scorer by import path (inspect_ai.scorer:includes)",
    )
    rescore.add_argument(
        "--as", dest="as_run_id", required=True, type=run_key_part("run id"), help="the new run id"
    )
    rescore.add_argument(
        "--grader-model", default=None, help="the model a model-graded scorer asks"
    )
    rescore.add_argument(
        "--base-url",
        default=None,
        help="the grader's OpenAI-compatible URL ending in /v1 (default: an embedded offline "
        "model server)",
    )
    rescore.add_argument(
        "--budget-usd",
        type=bounded("budget", float, 0.0, 1e6),
        default=None,
        help="stop asking the grader once its spend on the new run would pass this many USD",
    )
    add_concurrency(rescore, help="records scored at once")
    rescore.add_argument(
        "--wait",
        action="store_true",
        help="if the run is still being written (its lease held), wait for it to finish "
        "instead of refusing",
    )
    rescore.add_argument("--json", action="store_true", help="print the summary as JSON")
    rescore.set_defaults(handler=rescore_command)


def rescore_command(args: argparse.Namespace) -> int:
    """Rescore the run and print the new run's summary."""
    from resultlog.cli._connect import connect
    from resultlog.cli._interrupt import run_async
    from resultlog.producer.rescore import resolve_scorer

    source = run_key_of(args)
    scorer = resolve_scorer(args.scorer)  # a bad scorer is one line before any read
    with connect() as kafka:
        result = run_async(_rescore(args, kafka, source, scorer))
    _print(result, args)
    return 0


async def _rescore(args: argparse.Namespace, kafka: Any, source: Any, scorer: Any) -> RescoreResult:
    """Read the source run, then score and write it through the `run` machinery."""
    import asyncio
    import contextlib
    import functools

    from resultlog.cli._console import ProgressBar
    from resultlog.cli._run import check_base_url
    from resultlog.errors import CliError
    from resultlog.producer import KafkaResultStore, ModelClient, claim_lease
    from resultlog.producer.offline import ModelServer
    from resultlog.producer.rescore import Grader, read_finished, rescore_run

    loaded = await asyncio.to_thread(read_finished, kafka, source, wait=args.wait, on_wait=_say)
    if not loaded.records:
        raise CliError(f"run {source} has no records in {kafka.results_topic}")
    settings = kafka.settings
    store = KafkaResultStore(kafka)
    try:
        async with contextlib.AsyncExitStack() as stack:
            grader = None
            if scorer.graded:
                if args.grader_model is None:
                    raise CliError(f"--scorer {scorer.name} asks a model: give --grader-model")
                check_base_url(args.base_url)
                base_url = args.base_url or stack.enter_context(ModelServer()).base_url
                client = await stack.enter_async_context(
                    ModelClient(
                        base_url,
                        settings.api_key,
                        timeout=settings.model_timeout_s,
                        max_retries=settings.model_max_retries,
                        backoff_initial=settings.model_retry_backoff_s,
                    )
                )
                grader = Grader(client, args.grader_model)
            bar = stack.enter_context(ProgressBar(enabled=not args.json))
            return await rescore_run(
                loaded,
                args.as_run_id,
                scorer,
                store=store,
                grader=grader,
                lease=functools.partial(claim_lease, kafka),
                max_concurrency=args.concurrency,
                budget_usd=args.budget_usd,
                on_progress=bar.update,
            )
    finally:
        await store.close()


def _say(line: str) -> None:
    import sys

    print(f"resultlog: {line}", file=sys.stderr, flush=True)


def _print(result: RescoreResult, args: argparse.Namespace) -> None:
    """The new run's summary, with what the rescore did and what it cost (nothing new)."""
    import sys

    summary = result.summary
    if args.json:
        print(summary.model_dump_json(exclude_none=False))
    else:
        print(
            f"{summary.run_key}: rescored {result.source} with {args.scorer}: "
            f"{summary.records} records ({summary.degraded_records} degraded), "
            f"accuracy {summary.accuracy:.4f} over {summary.total_questions} questions"
        )
        print(
            f"this rescore: {result.rescored} scored, {result.skipped} already durable, "
            f"{result.degraded} degraded copied as they are, {result.grader_calls} grader "
            f"call(s); new spend {result.new_spend:.6f} USD (the bill carried is the source's: "
            f"{result.carried_spend:.6f} USD, not spent again)"
        )
    if result.unanswered:
        sample, epoch = result.unanswered[0]
        print(
            f"resultlog: warning: {len(result.unanswered)} record(s) have no stored answer "
            f"(first: sample {sample} epoch {epoch}): left out, not guessed",
            file=sys.stderr,
        )
    if result.grader_failed:
        print(
            f"resultlog: warning: the grader failed on {result.grader_failed} record(s): "
            "degraded, asked again when the same command runs again",
            file=sys.stderr,
        )
    if result.unstarted:
        print(
            f"resultlog: budget: {result.unstarted} record(s) not graded: run again with a "
            "larger --budget-usd",
            file=sys.stderr,
        )
