"""The aggregator's HTTP read API: run summaries, health and metrics (a starlette app).

Threading: the consumer loop runs in its own thread and the HTTP server in an asyncio loop;
the endpoints are plain functions, so starlette runs them in its thread pool and waiting for
the aggregator's state lock never blocks the event loop.

Paths accept what ordinary clients send: each segment is percent-decoded whatever the case of
its escapes, and the characters `encodeURIComponent` and RFC 3986 leave unescaped in a path
segment are taken as themselves (`(`, `)`, `!`, `*`, `'`, `:`, `@`, `+`...). The decoded
parts are the run key; keys on the wire stay canonical. A part is at most 256 characters, as
on the command line. `/runs` pages: `limit`, then `cursor` (opaque) to continue; the response
is the list of summaries with the total in `X-Total-Count` and the next page in `Link` (rel
next) and `X-Next-Cursor`.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from collections.abc import Mapping
from typing import Protocol
from urllib.parse import unquote_to_bytes, urlencode

from pydantic import SecretStr, TypeAdapter
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from resultlog.consumers.aggregator._health import Health
from resultlog.consumers.aggregator._state import Lookup, RunsPage
from resultlog.schemas import (
    DecodeError,
    InvalidRunKeyError,
    RunKey,
    RunSummary,
    decode_run_key,
    encode_run_key,
)

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
MAX_PART = 256  # characters of a run key part, as the command line allows
_PREFIX = b"/runs/"
_NAMES = ("run_id", "benchmark", "model")
# A path segment: RFC 3986 pchar (unreserved, sub-delims, ':' '@') or a %XX escape of any case.
_SEGMENT = re.compile(rb"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+")
_MAX_SEGMENT_BYTES = MAX_PART * 12  # each character a 4-byte UTF-8 sequence, each byte %XX
_SUMMARIES = TypeAdapter(list[RunSummary])
_FILTERS = {"run_id": "run_id", "benchmark": "benchmark", "model": "model"}


class SummarySource(Protocol):
    """What the API serves (the Aggregator is one)."""

    def lookup(self, run_key: RunKey) -> Lookup:
        """One run's current summary."""
        ...

    def page(
        self,
        *,
        run_id: str | None = None,
        benchmark: str | None = None,
        model: str | None = None,
        after: RunKey | None = None,
        limit: int | None = None,
    ) -> RunsPage:
        """A page of current summaries, filtered, in run key order after `after`."""
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
    """The run key of `/runs/{run_id}/{benchmark}/{model}`, each segment percent-encoded."""
    path = raw_path.split(b"?", 1)[0]
    if not path.startswith(_PREFIX):
        raise BadRequestError("the path must start with /runs/ (unencoded)")
    segments = path[len(_PREFIX) :].split(b"/")
    if len(segments) != len(_NAMES):
        raise _bad_path(f"found {len(segments)} segments, expected 3")
    parts = [_part(name, segment) for name, segment in zip(_NAMES, segments, strict=True)]
    try:
        return RunKey(*parts)
    except InvalidRunKeyError as exc:
        raise _bad_path(str(exc)) from exc


def _part(name: str, segment: bytes) -> str:
    """One decoded path segment: bounded, well-escaped, UTF-8."""
    if len(segment) > _MAX_SEGMENT_BYTES:
        raise _bad_path(f"{name} is longer than {MAX_PART} characters")
    if not _SEGMENT.fullmatch(segment):
        raise _bad_path(f"{name} {segment[:40]!r} is empty or has a bad percent-escape")
    try:
        value = unquote_to_bytes(segment).decode("utf-8")
    except UnicodeDecodeError:
        raise _bad_path(f"{name} {segment[:40]!r} is not percent-encoded UTF-8") from None
    if len(value) > MAX_PART:
        raise _bad_path(f"{name} is longer than {MAX_PART} characters")
    return value


def _bad_path(reason: str) -> BadRequestError:
    return BadRequestError(
        "expected /runs/{run_id}/{benchmark}/{model}, each segment percent-encoded "
        f"(e.g. openai%2Fgpt-4o): {reason}"
    )


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
    """ASGI middleware: every route but /healthz wants `Authorization: Bearer <token>`."""

    def __init__(self, app: ASGIApp, token: SecretStr) -> None:
        self._app = app
        self._expected = b"Bearer " + token.get_secret_value().encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] != "/healthz":
            given = dict(scope["headers"]).get(b"authorization", b"")
            # Constant time: the comparison must not tell how much of a guess was right.
            if not hmac.compare_digest(given, self._expected):
                detail = "this API wants Authorization: Bearer <RESULTLOG_HTTP_TOKEN>"
                response = _error(401, "unauthorized", detail, {"WWW-Authenticate": "Bearer"})
                await response(scope, receive, send)
                return
        await self._app(scope, receive, send)


def create_app(source: SummarySource, token: SecretStr | None = None) -> Starlette:
    """The starlette application serving `source`, behind a bearer token when one is given."""

    def list_runs(request: Request) -> Response:
        filters, limit = _list_params(request)
        cursor = request.query_params.get("cursor")
        after = _after(cursor) if cursor is not None else None
        found = source.page(after=after, limit=limit, **filters)
        headers = {"X-Total-Count": str(found.total)}
        if found.next_after is not None:
            following = cursor_of(found.next_after)
            query = urlencode({**filters, "limit": limit, "cursor": following})
            headers["X-Next-Cursor"] = following
            headers["Link"] = f'<{request.url.replace(query=query)}>; rel="next"'
        body = _SUMMARIES.dump_json(found.summaries)
        return Response(body, media_type="application/json", headers=headers)

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
    middleware = [] if token is None else [Middleware(_BearerToken, token=token)]
    return Starlette(
        routes=routes,
        middleware=middleware,
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
