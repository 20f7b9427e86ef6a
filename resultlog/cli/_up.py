"""Handler of `resultlog up`: the whole local stack in the foreground, stopped by Ctrl-C."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Any

from resultlog.broker import default_kafka_dir
from resultlog.cli._aggregator import parse_http_address, serve_aggregator
from resultlog.errors import CliError

__all__ = ["register"]

_LOCK = "up.json"


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `up` to the command line."""
    parser = commands.add_parser(
        "up",
        help="the local stack in the foreground: broker, topics, aggregator, runs page",
        description=(
            "Start a local Kafka broker (unless RESULTLOG_BOOTSTRAP_SERVERS names one), create "
            "the topics, run the aggregator and serve the runs page, until Ctrl-C or SIGTERM "
            "stops all of it. Prints the bootstrap address to export and the page's URL."
        ),
    )
    parser.add_argument(
        "--http",
        type=parse_http_address,
        default="127.0.0.1:8080",
        metavar="HOST:PORT",
        help="where to serve the runs page and the HTTP API (port 0: any free port)",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help=f"the broker's data directory (default: {default_kafka_dir()})",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="the broker's port for a new data directory (default 9092; 0: any free port)",
    )
    parser.set_defaults(handler=up_command)


def up_command(args: argparse.Namespace) -> int:
    """Run broker, topics, aggregator and page until a signal; stop what was started here."""
    from resultlog.broker import LocalKafka
    from resultlog.kafka import KafkaConnection
    from resultlog.settings import Settings
    from resultlog.topics import ensure_topics

    directory = (args.dir or default_kafka_dir()).resolve()
    host, port = args.http
    previous = signal.signal(signal.SIGTERM, _interrupt)  # stops the start-up cleanly too
    try:
        with _only_one(directory) as lock:
            configured = os.environ.get("RESULTLOG_BOOTSTRAP_SERVERS")
            broker = None if configured else LocalKafka(directory)
            started = broker is not None and not broker.running()
            try:
                bootstrap = broker.up(port=args.port) if broker else str(configured)
                settings = Settings() if configured else Settings(bootstrap_servers=bootstrap)
                with KafkaConnection(settings) as kafka:
                    kafka.check_connection()
                    ensure_topics(kafka)

                    def announce(url: str) -> None:
                        _announce(lock, bootstrap, url)

                    return serve_aggregator(kafka, host, port, announce=announce)
            finally:
                if started and broker:
                    broker.down()
    finally:
        signal.signal(signal.SIGTERM, previous)


def _announce(lock: IO[str], bootstrap: str, url: str) -> None:
    """Print the two lines a user needs; record them for a second `up` to point at."""
    print(f"export RESULTLOG_BOOTSTRAP_SERVERS={bootstrap}")
    print(f"runs page: {url}/", flush=True)
    print("resultlog up: broker, topics, aggregator running; Ctrl-C stops them", file=sys.stderr)
    lock.seek(0)
    lock.truncate()
    lock.write(json.dumps({"pid": os.getpid(), "bootstrap": bootstrap, "url": f"{url}/"}))
    lock.flush()


@contextlib.contextmanager
def _only_one(directory: Path) -> Iterator[IO[str]]:
    """Hold the directory's `up` lock; a second `up` on it says where the first one is."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / _LOCK
    with path.open("a+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CliError(_already_running(path)) from None
        try:
            lock.seek(0)
            lock.truncate()
            lock.write(json.dumps({"pid": os.getpid()}))
            lock.flush()
            yield lock
        finally:
            lock.seek(0)
            lock.truncate()


def _already_running(path: Path) -> str:
    """One line naming the running `up`: its pid, bootstrap address and page."""
    try:
        first = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        first = {}
    where = f"resultlog up already runs for {path.parent} (pid {first.get('pid', '?')})"
    if "url" not in first:
        return f"{where}, still starting"
    return f"{where}: RESULTLOG_BOOTSTRAP_SERVERS={first['bootstrap']}, runs page {first['url']}"


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM before the page serves: unwind as Ctrl-C does, stopping what started."""
    raise KeyboardInterrupt
