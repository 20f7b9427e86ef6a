"""Handler of `resultlog aggregator`: the summaries service and its HTTP read API."""

from __future__ import annotations

import argparse
import contextlib
import gc
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from resultlog._pem import PemError, check_private
from resultlog.cli._args import add_group, run_key_part
from resultlog.cli._connect import connect
from resultlog.errors import CliError
from resultlog.schemas.errors import ResultLogError

if TYPE_CHECKING:
    from resultlog.consumers.aggregator import Aggregator, HttpServer
    from resultlog.kafka import KafkaConnection

__all__ = ["cannot_listen", "parse_http_address", "register", "serve_aggregator"]

_MAX_PORT = 65_535
_YOUNG_COLLECTION = 20_000  # allocations between the collector's young collections
_M_ARENA_MAX = -8  # glibc mallopt parameter


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `aggregator` to the command line."""
    parser = commands.add_parser(
        "aggregator", help="fold the results topic into run summaries, publish and serve them"
    )
    parser.add_argument(
        "--http",
        type=parse_http_address,
        default=("127.0.0.1", 8080),
        metavar="HOST:PORT",
        help="where to serve the HTTP API (port 0: any free port); default 127.0.0.1:8080",
    )
    add_group(parser, help="consumer group id")
    parser.add_argument(
        "--instance-id",
        type=run_key_part("instance id"),
        default=None,
        help="static group membership: a restarted instance takes its partitions back at once",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="where the per-partition fold state is kept on disk (default: the setting "
        "RESULTLOG_AGGREGATOR_STATE_DIR, else $XDG_STATE_HOME/resultlog)",
    )
    parser.set_defaults(handler=aggregator_command)


def parse_http_address(text: str) -> tuple[str, int]:
    """An argparse type: HOST:PORT (an IPv6 host in brackets), port in 0..65535."""
    host, sep, port_text = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isdecimal():
        raise argparse.ArgumentTypeError(f"--http must look like HOST:PORT, got {text!r}")
    port = int(port_text)
    if port > _MAX_PORT:
        raise argparse.ArgumentTypeError(f"port must be in 0..{_MAX_PORT}, got {port}")
    return host, port


def cannot_listen(host: str, port: int, exc: OSError) -> CliError:
    """The one line for an HTTP address the OS refused, naming the way out."""
    return CliError(
        f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
        "`--http 127.0.0.1:0` serves on any free port"
    )


def aggregator_command(args: argparse.Namespace) -> int:
    """Run the aggregator until SIGTERM or SIGINT, then stop cleanly."""
    host, port = args.http
    with connect() as kafka:
        return serve_aggregator(
            kafka,
            host,
            port,
            group=args.group,
            instance_id=args.instance_id,
            state_dir=args.state_dir,
        )


def serve_aggregator(
    kafka: KafkaConnection,
    host: str,
    port: int,
    *,
    group: str | None = None,
    instance_id: str | None = None,
    state_dir: Path | None = None,
    announce: Callable[[str], None] | None = None,
) -> int:
    """Fold and serve until SIGTERM or SIGINT; `announce` gets the URL once it accepts."""
    from resultlog.cli._interrupt import run_async
    from resultlog.consumers.aggregator import Aggregator, HttpServer, create_app

    _few_malloc_arenas()
    settings = kafka.settings
    certificate, key = settings.http_tls_certificate, settings.http_tls_key
    _check_http_tls(certificate, key)
    aggregator = Aggregator(kafka, group_id=group, instance_id=instance_id, state_dir=state_dir)
    app = create_app(aggregator, token=settings.http_token, kafka=kafka)
    try:
        server = HttpServer(app, host, port, tls_certificate=certificate, tls_key=key)
    except OSError as exc:
        raise cannot_listen(host, port, exc) from exc
    stopped_by: list[signal.Signals] = []
    try:
        aggregator.start()
        # The heap built so far (modules, frameworks) lives as long as the process: taken
        # out of the collector's reach, full collections only scan the growing fold state
        # instead of pausing every thread for 100+ ms.
        gc.freeze()
        # At 700 allocations a young collection came several times a batch (2,000 records)
        # and traversed its messages before they died; at 20,000 most die untraversed.
        gc.set_threshold(_YOUNG_COLLECTION, *gc.get_threshold()[1:])
        run_async(_serve(server, aggregator, stopped_by, announce or _print_url))
    finally:
        aggregator.stop()
        server.close()
    _raise_failure(aggregator)
    if stopped_by:  # a requested stop is a success: say it happened, exit 0
        print(
            f"resultlog: aggregator stopped by {stopped_by[0].name}; pending summaries published",
            file=sys.stderr,
        )
    return 0


def _few_malloc_arenas() -> None:
    """Cap glibc's malloc arenas at two before the aggregator starts its threads.

    Each thread that allocates (librdkafka's, RocksDB's, the HTTP pool's: about 30) would
    otherwise get an arena of its own, and memory freed in one is seldom given back: the RSS
    kept a high-water mark that grew with the records read (measured between 30k and 90k
    records: 716 B per record with the default arenas, 580 B with two)."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to tune
        ctypes.CDLL(None).mallopt(_M_ARENA_MAX, 2)


def _check_http_tls(certificate: str | None, key: str | None) -> None:
    """The HTTP server's certificate and key load, or one line says why not."""
    if certificate is None and key is None:
        return
    if certificate is None or key is None:
        raise CliError("set both RESULTLOG_HTTP_TLS_CERTIFICATE and RESULTLOG_HTTP_TLS_KEY")
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certificate, key)
    except (OSError, ssl.SSLError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise CliError(
            f"RESULTLOG_HTTP_TLS_CERTIFICATE/RESULTLOG_HTTP_TLS_KEY do not load: {reason}"
        ) from None
    try:  # the rule of the Kafka key files: a private key nobody else may read
        check_private("RESULTLOG_HTTP_TLS_KEY", key)
    except PemError as exc:
        raise CliError(str(exc)) from None


async def _serve(
    server: HttpServer,
    aggregator: Aggregator,
    stopped_by: list[signal.Signals],
    announce: Callable[[str], None],
) -> None:
    """Serve until SIGTERM or SIGINT (recorded in `stopped_by`) or the aggregator stops."""
    import asyncio

    loop = asyncio.get_running_loop()

    def stop(signum: signal.Signals) -> None:
        stopped_by.append(signum)
        server.stop()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop, signum)
    announcing = asyncio.create_task(_announce(server, announce))
    try:
        await server.serve(should_stop=lambda: not aggregator.running)
    finally:
        announcing.cancel()


async def _announce(server: HttpServer, announce: Callable[[str], None]) -> None:
    """Tell the bound address once uvicorn accepts."""
    import asyncio

    while not server.started:
        await asyncio.sleep(0.01)
    announce(server.url)


def _print_url(url: str) -> None:
    """Scripts read this first line."""
    print(f"aggregator serving {url}", flush=True)


def _raise_failure(aggregator: Aggregator) -> None:
    failure = aggregator.failure
    if failure is None:
        return
    if isinstance(failure, ResultLogError):
        raise failure
    raise CliError(f"the aggregator failed: {type(failure).__name__}: {failure}") from failure
