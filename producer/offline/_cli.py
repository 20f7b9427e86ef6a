"""`resultlog model-server`: the offline model server in the foreground until a signal."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from resultlog._argtypes import bounded
from resultlog.producer.offline._model import DEFAULT_ERROR_RATE, DEFAULT_SEED, DEFAULT_WRONG_RATE

if TYPE_CHECKING:  # the server is loaded when it serves, not by every command line's parser
    from resultlog.producer.offline._app import Config

__all__ = ["add_arguments", "serve"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `resultlog model-server`."""
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port",
        type=bounded("port", int, 0, 65535),
        default=0,
        help="port to listen on (0: the OS chooses)",
    )
    parser.add_argument("--port-file", type=Path, help="write the bound port to this file")
    parser.add_argument(
        "--request-log",
        type=Path,
        help="append one JSON line per request (sample_id, epoch, model)",
    )
    parser.add_argument(
        "--latency-ms",
        type=bounded("latency", float, 0.0, 3_600_000.0),
        default=5.0,
        help="how long each answer takes: raise it (say 200) to have time to kill a run midway",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help="picks which (sample, epoch) pairs fail or are answered wrong; same seed, same run",
    )
    parser.add_argument(
        "--error-rate",
        type=bounded("error rate", float, 0.0, 1.0),
        default=DEFAULT_ERROR_RATE,
        help="share of pairs answered with a 429 or a 500 every time (they end degraded)",
    )
    parser.add_argument(
        "--wrong-rate",
        type=bounded("wrong rate", float, 0.0, 1.0),
        default=DEFAULT_WRONG_RATE,
        help="share of pairs answered wrong",
    )


def serve(args: argparse.Namespace) -> int:
    """Serve in the foreground until SIGTERM/SIGINT (`resultlog model-server`)."""
    import asyncio

    from resultlog.producer.offline._app import Config

    config = Config(args.latency_ms / 1000, args.seed, args.error_rate, args.wrong_rate)
    asyncio.run(_serve_until_signal(args.host, args.port, config, args.port_file, args.request_log))
    return 0


async def _serve_until_signal(
    host: str, port: int, config: Config, port_file: Path | None, request_log: Path | None
) -> None:
    """Serve in the main thread until a termination signal arrives."""
    import asyncio

    from resultlog.producer.offline._app import App, State
    from resultlog.producer.offline._http11 import Http11Server, listen

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sock = listen(host, port)
    bound = sock.getsockname()[1]
    log_file = request_log.open("a", encoding="utf-8") if request_log is not None else None
    state = State(log_file)
    server = Http11Server(App(config, state))
    await server.start(sock)
    if port_file is not None:
        _write_atomically(port_file, f"{bound}\n")
    print(f"offline model server at http://{host}:{bound}/v1", flush=True)
    try:
        await stop.wait()
    finally:
        await server.close()
        state.close_log()


def _write_atomically(path: Path, text: str) -> None:
    """Write a file so that a reader sees either nothing or the whole content."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
