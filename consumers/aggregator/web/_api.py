"""The aggregator's HTTP read API: run summaries, per-sample views, health and metrics.

Threading: the consumer loop runs in its own thread and the HTTP server in an asyncio loop;
the endpoints are plain functions, so starlette runs them in its thread pool and waiting for
the aggregator's state lock never blocks the event loop. Routes that read the log (samples,
compare, the page's parts) run in one bounded pool of their own (`_reads`: a few at once,
stopped when the client leaves); `/healthz` answers on the event loop, behind none of them.

Run keys in paths and queries follow `_paths`. `/runs` pages: `limit`, then `cursor` (opaque)
to continue; the response is the list of summaries with the total in `X-Total-Count` and the
next page in `Link` (rel next) and `X-Next-Cursor`.

Per-sample data: `/runs/{run_id}/{benchmark}/{model}/samples` (each latest record's value,
the per-sample values, accuracy per epoch, error kinds) and `/compare?a=RUN&b=RUN` (two runs
of one benchmark). Both are read from the run's partition on demand (`_samples`). The runs
page (`_page`) serves its HTML shells and static files without the token; its data comes from
routes that want it.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import threading
from dataclasses import dataclass
from urllib.parse import urlencode

from pydantic import SecretStr, TypeAdapter
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from resultlog.consumers._samples import Comparison
from resultlog.consumers.aggregator._state import RunFilter
from resultlog.consumers.aggregator.web._headers import SecurityHeaders
from resultlog.consumers.aggregator.web._page import OPEN_PATHS, OPEN_PREFIXES, page_routes
from resultlog.consumers.aggregator.web._paths import (
    MAX_PART,
    BadRequestError,
    compare_keys,
    run_key_from_path,
    run_route,
)
from resultlog.consumers.aggregator.web._published import PublishedSummaries
from resultlog.consumers.aggregator.web._reads import ReadPool
from resultlog.consumers.aggregator.web._samples import SampleCache
from resultlog.consumers.aggregator.web._source import (
    NotServedError,
    SummarySource,
    error,
    read_samples,
    served,
    served_summary,
    summary_json,
)
from resultlog.kafka import KafkaConnection
from resultlog.schemas import DecodeError, RunKey, RunSummary, decode_run_key, encode_run_key

__all__ = [
    "MAX_LIMIT",
    "MAX_PART",
    "BadRequestError",
    "SummarySource",
    "create_app",
    "run_key_from_path",
]

MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
_SUMMARIES = TypeAdapter(list[RunSummary])
_FILTERS = {"run_id": "run_id", "benchmark": "benchmark", "model": "model"}


def cursor_of(run_key: RunKey) -> str:
    """The opaque cursor of the page after `run_key`."""
    return base64.urlsafe_b64encode(encode_run_key(run_key)).decode("ascii").rstrip("=")


def _after(cursor: str) -> RunKey:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        return decode_run_key(raw)
    except (binascii.Error, ValueError, DecodeError):
        raise BadRequestError(f"cursor {cursor[:40]!r} is not one this API gave out") from None


class _BearerToken:
    """ASGI middleware: every route but /healthz and the page's shells wants
    `Authorization: Bearer <token>`."""

    def __init__(self, app: ASGIApp, token: SecretStr) -> None:
        self._app = app
        self._expected = token.get_secret_value().encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not _open(scope["path"]):
            given = dict(scope["headers"]).get(b"authorization", b"")
            scheme, _, credentials = given.partition(b" ")
            # The scheme is case-insensitive (RFC 7235); the token is compared in constant
            # time: the comparison must not tell how much of a guess was right.
            matches = hmac.compare_digest(credentials.lstrip(b" "), self._expected)
            if scheme.lower() != b"bearer" or not matches:
                detail = "this API wants Authorization: Bearer <RESULTLOG_HTTP_TOKEN>"
                response = error(401, "unauthorized", detail, {"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


def _open(path: str) -> bool:
    """Whether a path is served without the token: /healthz and the page's shells and static
    files, none of which holds data."""
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


def create_app(
    source: SummarySource,
    token: SecretStr | None = None,
    *,
    kafka: KafkaConnection | None = None,
) -> Starlette:
    """The starlette application serving `source`, behind a bearer token when one is given.

    With `kafka`, a run whose partition `source` does not hold fresh is served from the
    summaries topic, marked stale (see `_published`; released by `HttpServer.close`).
    """
    samples = SampleCache(source.run_records)
    reads = ReadPool()
    published = PublishedSummaries(kafka) if kafka is not None else None
    middleware = [Middleware(SecurityHeaders)]
    if token is not None:
        middleware.append(Middleware(_BearerToken, token=token))
    routes = _Api(source, samples, reads, published).routes()
    app = Starlette(
        routes=[*routes, *page_routes(source, samples, reads, published)],
        middleware=middleware,
        exception_handlers={
            HTTPException: _http_error,
            BadRequestError: _bad_request,
            NotServedError: _not_served,
        },
    )
    app.state.published = published
    return app


@dataclass(eq=False)
class _Api:
    """The JSON routes (and /healthz, /metrics), reading from `source` and `samples`."""

    source: SummarySource
    samples: SampleCache
    reads: ReadPool
    published: PublishedSummaries | None

    def __post_init__(self) -> None:
        self._samples_route = self.reads.route(self.get_samples)

    def routes(self) -> list[Route]:
        """Its routes, those that read the log on the read pool."""
        return [
            Route("/runs", self.list_runs, methods=["GET"]),
            Route("/runs/{rest:path}", self.get_run, methods=["GET"]),
            Route("/compare", self.reads.route(self.compare), methods=["GET"]),
            Route("/healthz", self.healthz, methods=["GET"]),
            Route("/metrics", self.metrics, methods=["GET"]),
        ]

    def list_runs(self, request: Request) -> Response:
        """A page of summaries, filtered, with the total and the next page in headers."""
        filters, limit = _list_params(request)
        cursor = request.query_params.get("cursor")
        after = _after(cursor) if cursor is not None else None
        found = self.source.page(where=RunFilter(**filters), after=after, limit=limit)
        headers = {"X-Total-Count": str(found.total)}
        if found.next_after is not None:
            following = cursor_of(found.next_after)
            query = urlencode({**filters, "limit": limit, "cursor": following})
            headers["X-Next-Cursor"] = following
            # Relative: built from the client's Host, it would point wherever the client says.
            headers["Link"] = f'</runs?{query}>; rel="next"'
        if found.stale:
            each = (summary_json(s, stale=s.run_key in found.stale) for s in found.summaries)
            body = b"[" + b",".join(each) + b"]"
        else:
            body = _SUMMARIES.dump_json(found.summaries)
        return Response(body, media_type="application/json", headers=headers)

    async def get_run(self, request: Request) -> Response:
        """A run's summary, or (under `/samples`) its per-sample view."""
        _, view = run_route(request.scope["raw_path"])
        if view is None:
            return await run_in_threadpool(self.get_summary, request)
        return await self._samples_route(request)

    def get_summary(self, request: Request) -> Response:
        """A run's summary (marked stale while no instance holds its partition fresh)."""
        run_key, _ = run_route(request.scope["raw_path"])
        found = served(self.source, run_key, self.published)
        assert found.summary is not None
        return Response(
            summary_json(found.summary, stale=found.stale), media_type="application/json"
        )

    def get_samples(self, request: Request, stop: threading.Event) -> Response:
        """A run's per-sample view, read from its partition."""
        run_key, _ = run_route(request.scope["raw_path"])
        summary = served_summary(self.source, run_key, self.published)
        return JSONResponse(read_samples(self.samples, summary, stop).as_json())

    def compare(self, request: Request, stop: threading.Event) -> Response:
        """Two runs of one benchmark, sample by sample."""
        keys = compare_keys(request.scope["query_string"])
        views = [
            read_samples(self.samples, served_summary(self.source, k, self.published), stop)
            for k in keys
        ]
        return JSONResponse(Comparison.of(*views).as_json())

    async def healthz(self, request: Request) -> Response:
        """Readiness; on the event loop: never queued behind routes that wait for threads."""
        health = self.source.health()
        return JSONResponse(health.as_json(), status_code=200 if health.ready else 503)

    def metrics(self, request: Request) -> Response:
        """The Prometheus exposition."""
        body, content_type = self.source.exposition()
        return Response(body, headers={"Content-Type": content_type})


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


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error(exc.status_code, "http_error", exc.detail, headers=exc.headers)


async def _bad_request(request: Request, exc: Exception) -> Response:
    return error(400, "bad_request", str(exc))


async def _not_served(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, NotServedError)
    return exc.response
