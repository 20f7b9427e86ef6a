"""Handlers of `resultlog run` and `resultlog model-server`: a worker on the command line."""

from __future__ import annotations

import argparse
import contextlib
import functools
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from resultlog.cli._args import (
    add_concurrency,
    add_epochs,
    add_run_key_part,
    parse_range,
    positive_int,
    run_key_part,
)
from resultlog.cli._connect import connect
from resultlog.cli._figures import usd
from resultlog.errors import CliError
from resultlog.schemas import MAX_COST_USD

if TYPE_CHECKING:
    import asyncio

    from resultlog.kafka import KafkaConnection
    from resultlog.producer import Benchmark, RunConfig, RunResult

__all__ = [
    "BUDGET_EXIT",
    "add_run_options",
    "benchmark_of",
    "check_base_url",
    "check_budget",
    "check_run_options",
    "config_of",
    "register",
    "warn_keyless",
]

BUDGET_EXIT = 3
"""The exit code of a run the budget stopped: everything finished is durable."""
RESUME_HINT = "the pairs finished before it are durable: run the same command to resume"
"""How to go on after a Ctrl-C of a run before its pairs started."""


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `run` and `model-server` to the command line."""
    from resultlog.producer import offline

    run = commands.add_parser(
        "run",
        help="run a benchmark, persisting every (sample, epoch)",
        description=(
            "Run a benchmark against an OpenAI-compatible endpoint (without --base-url: an "
            "offline model server started for the run, whose costs are simulated). Each "
            "finished (sample, epoch) pair is durable in Kafka: the same command again skips "
            "those and asks the degraded ones again."
        ),
    )
    add_run_options(run)
    add_concurrency(run, help="model calls in flight at once")
    run.add_argument("--json", action="store_true", help="print the summary as JSON")
    run.add_argument(
        "--accept-config-change",
        action="store_true",
        help="reuse durable records made under another configuration as they are",
    )
    run.set_defaults(handler=run_command, check=check_run_options, on_interrupt=RESUME_HINT)

    server = commands.add_parser("model-server", help="serve the offline model until stopped")
    offline.add_arguments(server)
    server.set_defaults(handler=offline.serve)


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options that shape a run, shared by `run` and `submit`."""
    parser.add_argument(
        "benchmark", help="a built-in name (arith) or a JSONL file with id, input, target"
    )
    add_run_key_part(
        parser,
        "model",
        help="the model's name as the endpoint knows it (any name for the offline model)",
    )
    add_run_key_part(
        parser, "run_id", help="a name you choose for the run; the same name resumes it"
    )
    add_epochs(
        parser,
        default=1,
        help="how many times each sample is asked (accuracy averages a sample over them)",
    )
    parser.add_argument(
        "--limit",
        type=positive_int("limit", 10_000_000),
        default=None,
        help="take the first N samples (default: all)",
    )
    parser.add_argument(
        "--range",
        dest="sample_range",
        type=parse_range,
        default=None,
        metavar="A:B",
        help="take the samples at indexes A to B-1 (default: all)",
    )
    parser.add_argument(
        "--base-url",
        default=None,
        help="OpenAI-compatible URL ending in /v1, key from RESULTLOG_API_KEY or "
        "OPENROUTER_API_KEY (default: an embedded offline model server)",
    )
    parser.add_argument(
        "--any-base-path",
        action="store_true",
        help="take a --base-url whose path does not end in /v1 as it is (an endpoint that "
        "serves chat/completions elsewhere)",
    )
    parser.add_argument(
        "--degrade-solver-errors",
        action="store_true",
        help="record a pair whose solver or scorer raised as degraded (asked again on resume) "
        "instead of stopping the run",
    )
    parser.add_argument(
        "--temperature",
        type=_temperature,
        default=None,
        help="sampling temperature sent to the model, 0 to 2 (default: the endpoint's)",
    )
    parser.add_argument(
        "--max-tokens",
        type=positive_int("max tokens", 2**31 - 1),
        default=None,
        help="largest answer sent to the model as max_tokens (default: the endpoint's)",
    )
    parser.add_argument(
        "--budget-usd",
        type=_budget,
        default=None,
        help="start no pair once the run key's spend would pass this many USD (default: none)",
    )
    parser.add_argument(
        "--max-pair-usd",
        type=_budget,
        default=None,
        help="with --budget-usd: what one pair may cost while no pair's cost is known "
        "(default: the first pairs run one at a time to learn it)",
    )


def _temperature(text: str) -> float:
    """An argparse type: a sampling temperature in [0, 2]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"temperature must be a number, got {text!r}") from None
    if not 0.0 <= value <= 2.0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"temperature must be between 0 and 2, got {text}")
    return value


def _budget(text: str) -> float:
    """An argparse type: a budget in USD, in [0, 1e6]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"budget must be a number, got {text!r}") from None
    if not 0.0 <= value <= MAX_COST_USD:  # also refuses nan
        raise argparse.ArgumentTypeError(f"budget must be between 0 and 1e6 USD, got {text}")
    return value


# What a shell reports for a process ended by SIGTERM: 128 + 15.
_TERMINATED_EXIT = 128 + signal.SIGTERM


# What a shell reports for a process ended by SIGINT (Ctrl-C): 128 + 2.
_INTERRUPTED_EXIT = 128 + signal.SIGINT


def _stopped(by: str) -> str:
    """The line a run stopped by a signal ends with: what is saved, and how to go on."""
    return (
        f"stopped by {by}: the pairs finished before it are durable and none was started "
        "after it; run the same command to resume"
    )


class _TerminatedError(CliError):
    """The run stopped on SIGTERM."""

    def __init__(self) -> None:
        super().__init__(_stopped("SIGTERM"))


def run_command(args: argparse.Namespace) -> int:
    """Run (or resume) a benchmark and print its summary."""
    from resultlog.cli._console import print_summary
    from resultlog.cli._interrupt import run_async

    benchmark = benchmark_of(args)
    # Until the event loop takes SIGTERM over (see _run), nothing has started: just stop.
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        with connect() as kafka:
            warn_keyless(args.base_url, kafka.settings.api_key is not None)
            result = run_async(_run(args, kafka, benchmark))
    except _TerminatedError as exc:
        print(f"resultlog: error: {exc}", file=sys.stderr)
        return _TERMINATED_EXIT
    except KeyboardInterrupt:
        print(f"resultlog: error: {_stopped('Ctrl-C (SIGINT)')}", file=sys.stderr)
        return _INTERRUPTED_EXIT
    finally:
        signal.signal(signal.SIGTERM, previous)
    if args.json:
        print(result.summary.model_dump_json(exclude_none=False))
    else:
        print_summary(result, simulated_cost=args.base_url is None)
    if result.stopped_by_budget:
        print(f"resultlog: budget: {_budget_stop(result, args.budget_usd)}", file=sys.stderr)
        return BUDGET_EXIT
    return 0


def _budget_stop(result: RunResult, budget_usd: float) -> str:
    """The one line saying why the run stopped and how to go on."""
    summary = result.summary
    return (
        f"{summary.run_key} has spent {usd(summary.spent_cost)} of its {usd(budget_usd)} USD: "
        f"{result.unstarted} pair(s) not started, everything finished is durable; "
        f"run again with a larger --budget-usd to go on"
    )


def config_of(args: argparse.Namespace, benchmark: Benchmark) -> RunConfig:
    """The configuration of the run the command line asks for."""
    from resultlog.producer import run_config

    return run_config(
        benchmark,
        args.model,
        base_url=args.base_url,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
    )


def benchmark_of(args: argparse.Namespace) -> Benchmark:
    """The benchmark named on the command line, limited as asked."""
    from resultlog.producer import resolve_benchmark
    from resultlog.producer.datasets import limit_samples

    benchmark = resolve_benchmark(args.benchmark)
    try:  # a JSONL benchmark is named after its file: the name must make a run key part
        run_key_part("benchmark name")(benchmark.name)
    except argparse.ArgumentTypeError as exc:
        raise CliError(f"{args.benchmark}: {exc}") from None
    if args.limit is not None:
        benchmark = limit_samples(benchmark, args.limit)
    _refuse_missing_targets(args.benchmark, benchmark)
    return benchmark


def _refuse_missing_targets(given: str, benchmark: Benchmark) -> None:
    """A sample without a target would be scored wrong whatever the model answers: refuse."""
    samples = benchmark.samples()
    missing = [sample.id for sample in samples if sample.target is None]
    if missing:
        raise CliError(
            f"{given}: {len(missing)} of {len(samples)} samples have no target (first: "
            f"{missing[0]!r}), so every answer to them would score wrong; give each line a "
            '"target"'
        )


async def _run(args: argparse.Namespace, kafka: KafkaConnection, benchmark: Benchmark) -> RunResult:
    """The run, stopped on SIGTERM as on SIGINT: no new pair, finished ones flushed."""
    import asyncio

    terminated = _cancel_on_sigterm()
    try:
        return await _run_to_end(args, kafka, benchmark)
    except asyncio.CancelledError:
        if not terminated.is_set():
            raise
        raise _TerminatedError from None


def _raise_terminated(_signum: int, _frame: object) -> None:
    raise _TerminatedError


def _cancel_on_sigterm() -> asyncio.Event:
    """Cancel the running task on SIGTERM (as asyncio.run does on SIGINT); the event says so."""
    import asyncio

    terminated = asyncio.Event()
    task = asyncio.current_task()
    assert task is not None, "called from a task"

    def on_sigterm() -> None:
        terminated.set()
        task.cancel()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)
    return terminated


async def _run_to_end(
    args: argparse.Namespace, kafka: KafkaConnection, benchmark: Benchmark
) -> RunResult:
    from resultlog.cli._console import ProgressBar
    from resultlog.producer import (
        KafkaResultStore,
        ModelClient,
        RunBudget,
        RunOptions,
        UnansweredError,
        claim_lease,
        config_solver,
        run_benchmark,
    )

    settings = kafka.settings
    config = config_of(args, benchmark)
    store = KafkaResultStore(kafka)
    try:
        with _endpoint(args.base_url) as base_url, ProgressBar(enabled=not args.json) as bar:
            async with ModelClient(
                base_url,
                settings.api_key,
                timeout=settings.model_timeout_s,
                max_retries=settings.model_max_retries,
                backoff_initial=settings.model_retry_backoff_s,
            ) as client:
                return await run_benchmark(
                    benchmark,
                    args.model,
                    run_id=args.run_id,
                    solver=config_solver(client, config),
                    store=store,
                    options=RunOptions(
                        epochs=args.epochs,
                        max_concurrency=args.concurrency,
                        sample_range=args.sample_range,
                        degrade_solver_errors=args.degrade_solver_errors,
                        config=config,
                        accept_config_change=args.accept_config_change,
                    ),
                    budget=None
                    if args.budget_usd is None
                    else RunBudget(args.budget_usd, args.max_pair_usd),
                    on_progress=bar.update,
                    lease=functools.partial(claim_lease, kafka),
                )
    except UnansweredError as exc:
        endpoint = args.base_url or "the offline model"
        raise CliError(
            f"{endpoint} answered no pair of run {args.run_id}: {exc.answers} "
            f"(the degraded outcomes are durable)"
        ) from exc
    finally:
        await store.close()


@contextlib.contextmanager
def _endpoint(base_url: str | None) -> Iterator[str]:
    """The model endpoint: the given URL, or an embedded offline server for the run."""
    from resultlog.producer.offline import ModelServer

    if base_url is not None:
        yield base_url
        return
    with ModelServer() as server:
        yield server.base_url


def check_run_options(args: argparse.Namespace) -> None:
    """Refuse run options that contradict each other or a --base-url that cannot work."""
    check_budget(args)
    check_base_url(args.base_url, any_path=args.any_base_path)


def check_budget(args: argparse.Namespace) -> None:
    """Refuse a --max-pair-usd without the --budget-usd it bounds."""
    if args.max_pair_usd is not None and args.budget_usd is None:
        raise CliError("--max-pair-usd bounds a budget's first pairs: give --budget-usd too")


def check_base_url(base_url: str | None, *, any_path: bool = False) -> None:
    """Refuse a --base-url that is not an http(s) URL ending in /v1 (unless `any_path`)."""
    from urllib.parse import urlsplit

    if base_url is None:
        return
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(f"--base-url must be an http(s) URL ending in /v1, got {base_url!r}")
    if not any_path and not parts.path.rstrip("/").endswith("/v1"):
        raise CliError(
            f"--base-url must end in /v1 (chat/completions is asked under it), got "
            f"{base_url!r}: try {base_url.rstrip('/')}/v1, or --any-base-path for an endpoint "
            "that serves it elsewhere"
        )


_LOOPBACK = ("localhost", "127.0.0.1", "::1")


def warn_keyless(base_url: str | None, has_key: bool) -> None:
    """Warn, before the run, of a remote endpoint asked without an API key."""
    from urllib.parse import urlsplit

    if base_url is None or has_key:
        return
    host = urlsplit(base_url).hostname or ""
    if host in _LOOPBACK or host.startswith("127."):
        return
    print(
        f"resultlog: warning: no API key for {base_url}: set RESULTLOG_API_KEY (or "
        "OPENROUTER_API_KEY) if the endpoint wants one (a 401 would fail the run)",
        file=sys.stderr,
    )
