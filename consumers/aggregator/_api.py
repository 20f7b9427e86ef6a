"""The aggregator's HTTP read API: run summaries, health and metrics (starlette on uvicorn).

Threading: the consumer loop runs in its own thread and the HTTP server in an asyncio loop;
the endpoints are plain functions, so starlette runs them in its thread pool and waiting for
the aggregator's state lock never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

import uvicorn
from pydantic import TypeAdapter
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from resultlog.consumers.aggregator._health import Health
from resultlog.consumers.aggregator._state import Lookup
from resultlog.schemas import DecodeError, RunKey, RunSummary, decode_run_key

__all__ = [
    "MAX_LIMIT",
    "BadRequestError",
    "HttpServer",
    "SummarySource",
    "create_app",
    "run_key_from_path",
]

MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
_PREFIX = b"/runs/"
_SUMMARIES = TypeAdapter(list[RunSummary])
_FILTERS = {"run_id": "run_id", "benchmark": "benchmark", "model": "model"}


class SummarySource(Protocol):
    """What the API serves (the Aggregator is one)."""

    def lookup(self, run_key: RunKey) -> Lookup:
        """One run's current summary."""
        ...

    def summaries(
        self,
        *,
        run_id: str | None = None,
        benchmark: str | None = None,
        model: str | None = None,
        limit: int | None = None,
    ) -> list[RunSummary]:
        """Current summaries, filtered, in run key order."""
        ...

    def health(self) -> Health:
        """Readiness and lag."""
        ...

    def exposition(self) -> tuple[bytes, str]:
        """Prometheus text exposition and its content type."""
        ...


class BadRequestError(ValueError):
    """A request the API refuses with 400."""


def run_key_from_path(raw_path: bytes) -> RunKey:
    """The run key of `/runs/{run_id}/{benchmark}/{model}`, segments percent-encoded as keys."""
    path = raw_path.split(b"?", 1)[0]
    if not path.startswith(_PREFIX):
        raise BadRequestError("the path must start with /runs/ (unencoded)")
    try:
        return decode_run_key(path[len(_PREFIX) :])
    except DecodeError as exc:
        raise BadRequestError(
            f"expected /runs/{{run_id}}/{{benchmark}}/{{model}}, each segment percent-encoded "
            f"as in keys (e.g. openai%2Fgpt-4o): {exc.reason}"
        ) from exc


def create_app(source: SummarySource) -> Starlette:
    """The starlette application serving `source`."""

    def list_runs(request: Request) -> Response:
        filters, limit = _list_params(request)
        found = source.summaries(limit=limit, **filters)
        return Response(_SUMMARIES.dump_json(found), media_type="application/json")

    def get_run(request: Request) -> Response:
        run_key = run_key_from_path(request.scope["raw_path"])
        found = source.lookup(run_key)
        if found.summary is not None:
            return Response(found.summary.model_dump_json(), media_type="application/json")
        if found.rebuilding:
            detail = f"partition {found.partition} is still being rebuilt; retry shortly"
            return _error(503, "rebuilding", detail, headers={"Retry-After": "1"})
        where = "" if found.assigned else f" (partition {found.partition} is not served here)"
        return _error(404, "not_found", f"no run {_describe(run_key)}{where}")

    def healthz(request: Request) -> Response:
        health = source.health()
        return JSONResponse(health.as_json(), status_code=200 if health.ready else 503)

    def metrics(request: Request) -> Response:
        body, content_type = source.exposition()
        return Response(body, headers={"Content-Type": content_type})

    routes = [
        Route("/runs", list_runs, methods=["GET"]),
        Route("/runs/{rest:path}", get_run, methods=["GET"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    return Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, BadRequestError: _bad_request},
    )


def _list_params(request: Request) -> tuple[dict[str, str], int]:
    filters: dict[str, str] = {}
    for name, argument in _FILTERS.items():
        value = request.query_params.get(name)
        if value is not None:
            if not value:
                raise BadRequestError(f"{name} must not be empty")
            filters[argument] = value
    text = request.query_params.get("limit")
    if text is None:
        return filters, DEFAULT_LIMIT
    if not text.isdecimal() or not 1 <= int(text) <= MAX_LIMIT:
        raise BadRequestError(f"limit must be an integer in 1..{MAX_LIMIT}, got {text!r}")
    return filters, int(text)


def _describe(run_key: RunKey) -> str:
    return f"{run_key.run_id}/{run_key.benchmark_id}/{run_key.model}"


def _error(
    status: int, error: str, detail: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail}, status_code=status, headers=headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, "http_error", exc.detail, headers=exc.headers)


async def _bad_request(request: Request, exc: Exception) -> Response:
    return _error(400, "bad_request", str(exc))


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the caller decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    """uvicorn on a socket bound up front, so port 0 is resolved before serving starts."""

    def __init__(self, app: Starlette, host: str = "127.0.0.1", port: int = 8080) -> None:
        self._socket = _listen(host, port)
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=5
        )
        self._server = _Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The bound address, e.g. http://127.0.0.1:43123."""
        host, port = self._socket.getsockname()[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    @property
    def started(self) -> bool:
        """True once uvicorn accepts connections."""
        return bool(self._server.started)

    async def serve(self, should_stop: Callable[[], bool] | None = None) -> None:
        """Serve until `stop()` is called or `should_stop()` turns true."""
        task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        while not task.done():
            if should_stop is not None and should_stop():
                self.stop()
            await asyncio.wait({task}, timeout=0.1)
        await task

    def stop(self) -> None:
        """Ask the server to finish (thread-safe)."""
        self._server.should_exit = True

    def start_in_thread(self, timeout_s: float = 10.0) -> None:
        """Serve from a background thread (tests, benchmarks); wait until it accepts."""
        self._thread = threading.Thread(
            target=asyncio.run, args=(self.serve(),), name="resultlog-http", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise TimeoutError("the HTTP server did not start")
            time.sleep(0.01)

    def close(self) -> None:
        """Stop a server started with `start_in_thread` and release the socket."""
        self.stop()
        if self._thread is not None:
            self._thread.join(10)
        self._socket.close()


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket; OSError if the address cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # An explicit IPPROTO_TCP: asyncio sets TCP_NODELAY only on accepted sockets of that
    # protocol, and without it each keep-alive response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(512)
    except BaseException:
        sock.close()
        raise
    return sock
