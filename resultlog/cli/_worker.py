"""Handler of `resultlog worker`: one member of the consumer group that runs chunk tasks."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from resultlog.cli._args import add_concurrency, add_group, positive_int
from resultlog.cli._connect import connect

if TYPE_CHECKING:
    from resultlog.producer.worker import ChunkWorker

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `worker` to the command line."""
    worker = commands.add_parser("worker", help="run chunk tasks from the work topic")
    add_group(worker, help="consumer group (default: RESULTLOG_WORK_GROUP, resultlog-workers)")
    add_concurrency(worker, help="(sample, epoch) pairs in flight within a chunk")
    worker.add_argument(
        "--max-chunks",
        type=positive_int("max chunks", 2**31 - 1),
        default=None,
        help="exit after N tasks are run or dead-lettered",
    )
    worker.set_defaults(handler=worker_command)


def worker_command(args: argparse.Namespace) -> int:
    """Serve the work topic until SIGTERM/SIGINT (or --max-chunks), then say what was done."""
    from resultlog.producer.worker import ChunkWorker, WorkerOptions

    with connect() as kafka:
        options = WorkerOptions(
            group=args.group or kafka.settings.work_group,
            concurrency=args.concurrency,
            max_chunks=args.max_chunks,
        )
        worker = ChunkWorker(kafka, options)
        with _stopping_on_signals(worker):
            report = worker.run()
    print(f"resultlog worker: {report}", file=sys.stderr)
    return 0


@contextlib.contextmanager
def _stopping_on_signals(worker: ChunkWorker) -> Iterator[None]:
    """SIGTERM and SIGINT ask the worker to leave cleanly instead of killing it."""
    handled = (signal.SIGTERM, signal.SIGINT)
    previous = {sig: signal.getsignal(sig) for sig in handled}
    for sig in handled:
        signal.signal(sig, lambda _sig, _frame: worker.stop())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
