"""Handler of `resultlog up`: the whole local stack in the foreground, stopped by Ctrl-C."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

from resultlog.broker import default_kafka_dir
from resultlog.cli._aggregator import cannot_listen, parse_http_address, serve_aggregator
from resultlog.errors import CliError

if TYPE_CHECKING:
    from resultlog.broker import LocalKafka

__all__ = ["check_up", "register", "running_up"]

_LOCK = "up.json"
_STATE = "aggregator-state"  # the stack's own aggregator state, under its --dir
# Every signal whose default action ends the process (SIGKILL and SIGSTOP cannot be caught).
_STOP_SIGNALS = (
    signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
    signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF, signal.SIGXCPU, signal.SIGXFSZ,
)  # fmt: skip


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
        help=f"the stack's directory: the broker's data and the aggregator's state "
        f"(default: {default_kafka_dir()})",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help="the broker's port for a new data directory (default 9092; 0: any free port)",
    )
    parser.set_defaults(handler=up_command, check=check_up)


def up_command(args: argparse.Namespace) -> int:
    """Run broker, topics, aggregator and page until a signal; stop what was started here."""
    from resultlog.broker import LocalKafka
    from resultlog.kafka import KafkaConnection
    from resultlog.settings import Settings
    from resultlog.topics import ensure_topics

    directory = (args.dir or default_kafka_dir()).resolve()
    host, port = args.http
    # Any signal that would end the process unwinds as Ctrl-C does, stopping what started.
    previous = {signum: signal.signal(signum, _interrupt) for signum in _STOP_SIGNALS}
    try:
        with _only_one(directory) as (lock, before):
            _check_http_port(host, port)  # before any broker starts
            configured = os.environ.get("RESULTLOG_BOOTSTRAP_SERVERS")
            broker = None if configured else LocalKafka(directory)
            started = broker is not None and _ours_to_stop(broker, before)
            _note(lock, {"started_broker": started})  # before it starts: a kill may follow
            try:
                bootstrap = broker.up(port=args.port, tied=True) if broker else str(configured)
                settings = Settings() if configured else Settings(bootstrap_servers=bootstrap)
                with KafkaConnection(settings) as kafka:
                    kafka.check_connection()
                    ensure_topics(kafka)

                    def announce(url: str) -> None:
                        _announce(lock, bootstrap, url, started)

                    state_dir = None
                    if settings.aggregator_state_dir is None:  # one state per stack
                        state_dir = directory / _STATE
                    return serve_aggregator(
                        kafka, host, port, state_dir=state_dir, announce=announce
                    )
            finally:
                if started and broker:
                    broker.down()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def check_up(args: argparse.Namespace) -> None:
    """Refuse a taken HTTP port at once, before anything loads (unless an `up` of the
    directory runs: then its own line says where)."""
    if running_up((args.dir or default_kafka_dir()).resolve()) is None:
        _check_http_port(*args.http)


def _check_http_port(host: str, port: int) -> None:
    """Refuse an HTTP address the OS will not let this process listen on, at once."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            # As the server binds: its own connections left in TIME_WAIT do not count.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise cannot_listen(host, port, exc) from exc


def running_up(directory: Path) -> str | None:
    """One line naming the `up` that runs for `directory` now, or None when none does."""
    path = directory / _LOCK
    try:
        lock = path.open("r")
    except FileNotFoundError:
        return None
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _already_running(path)
    return None  # a record an `up` killed left behind: nobody holds it


def _ours_to_stop(broker: LocalKafka, before: dict[str, Any]) -> bool:
    """Whether this `up` stops the broker at the end: one it starts, or one an earlier `up`
    of the directory started and left running when it died (adopted, and said so)."""
    if not broker.running():
        return True
    if before.get("started_broker"):
        print(
            f"resultlog up: adopting the broker an earlier up (pid {before.get('pid', '?')}) "
            f"left running in {broker.directory}; it stops with this stack",
            file=sys.stderr,
        )
        return True
    print(
        f"resultlog up: using the broker already running in {broker.directory}; "
        "it keeps running after this stack (`resultlog kafka down` stops it)",
        file=sys.stderr,
    )
    return False


def _note(lock: IO[str], fields: dict[str, Any]) -> None:
    """Add `fields` to the lock file's record."""
    _write_record(lock, {**_read_record(lock), **fields})


def _read_record(lock: IO[str]) -> dict[str, Any]:
    """The lock file's record (empty when there is none or it is not a JSON object)."""
    lock.seek(0)
    try:
        record = json.loads(lock.read() or "{}")
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _write_record(lock: IO[str], record: dict[str, Any]) -> None:
    """Replace the lock file's record with `record`."""
    lock.seek(0)
    lock.truncate()
    lock.write(json.dumps(record))
    lock.flush()


def _announce(lock: IO[str], bootstrap: str, url: str, started: bool) -> None:
    """Print the two lines a user needs; record them for a second `up` to point at."""
    print(f"export RESULTLOG_BOOTSTRAP_SERVERS={bootstrap}")
    print(f"runs page: {url}/", flush=True)
    print("resultlog up: broker, topics, aggregator running; Ctrl-C stops them", file=sys.stderr)
    record = {"pid": os.getpid(), "bootstrap": bootstrap, "url": f"{url}/"}
    _note(lock, {**record, "started_broker": started})


@contextlib.contextmanager
def _only_one(directory: Path) -> Iterator[tuple[IO[str], dict[str, Any]]]:
    """Hold the directory's `up` lock, yielding it and what the last holder recorded there
    (a holder killed leaves its record); a second `up` on it says where the first one is.
    The lock file is removed at the end."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / _LOCK
    while True:
        lock = path.open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise CliError(_already_running(path)) from None
        if _same_file(lock, path):
            break
        lock.close()  # removed by the holder that just ended: lock the new one
    try:
        before = _read_record(lock)
        _write_record(lock, {"pid": os.getpid()})
        yield lock, before
    finally:
        path.unlink(missing_ok=True)  # before the lock is released: see _same_file
        lock.close()


def _same_file(lock: IO[str], path: Path) -> bool:
    """Whether the locked file is still the one at `path` (not removed by its last holder)."""
    try:
        return os.stat(path).st_ino == os.fstat(lock.fileno()).st_ino
    except FileNotFoundError:
        return False


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
    """A signal before the page serves (or one it does not handle): unwind as Ctrl-C does."""
    raise KeyboardInterrupt
