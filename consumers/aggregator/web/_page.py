"""The runs page: `GET /` and its routes (shells, static files, and the parts it polls).

Three pages, each an HTML shell that holds no data and is served without the token:
`/` (every run), `/page/run/{run_id}/{benchmark}/{model}` (one run) and
`/page/compare?a=RUN&b=RUN` (run against run). The shell's script (`static/page.js`) fetches
its part, server-rendered HTML and SVG under `/parts/...`, with `Authorization: Bearer` when
the user gave a token, and again every second or two while the page is open, so the page
follows the log without a reload. Parts want the token like every data route; their numbers
come from the objects the JSON routes serialise. Nothing is fetched from elsewhere.
"""

from __future__ import annotations

import functools
import threading
import time
from importlib import resources

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from resultlog.consumers._samples import Comparison, RunSamples
from resultlog.consumers.aggregator._state import RunFilter
from resultlog.consumers.aggregator.web import _html
from resultlog.consumers.aggregator.web._paths import BadRequestError, compare_keys, run_route
from resultlog.consumers.aggregator.web._published import PublishedSummaries
from resultlog.consumers.aggregator.web._reads import ReadPool
from resultlog.consumers.aggregator.web._samples import SampleCache
from resultlog.consumers.aggregator.web._source import (
    SummarySource,
    read_samples,
    served,
    served_summary,
)
from resultlog.consumers.errors import ConsumerError
from resultlog.schemas import RunKey, RunSummary

__all__ = ["OPEN_PATHS", "OPEN_PREFIXES", "page_routes"]

OPEN_PATHS = frozenset({"/", "/healthz"})
OPEN_PREFIXES = ("/page/", "/static/")
MAX_RUNS_SHOWN = 200
_RUNS_EVERY_MS = 1000
_RUN_EVERY_MS = 2000
_READ_BUDGET_S = 1.0  # per request of the runs part: reads of runs not cached yet
_STATIC = {"page.js": "text/javascript", "page.css": "text/css"}
_NO_STORE = {"Cache-Control": "no-store"}


@functools.cache
def _static_files() -> dict[str, bytes]:
    folder = resources.files("resultlog.consumers.aggregator.web") / "static"
    return {name: (folder / name).read_bytes() for name in _STATIC}


def page_routes(
    source: SummarySource,
    samples: SampleCache,
    reads: ReadPool,
    published: PublishedSummaries | None = None,
) -> list[Route]:
    """The routes of the runs page, reading from `source` and `samples` (through `reads`), and
    from `published` for runs `source` does not hold fresh."""
    parts = _Parts(source, samples, published)
    return [
        Route("/", _runs_shell, methods=["GET"]),
        Route("/page/run/{rest:path}", _run_shell, methods=["GET"]),
        Route("/page/compare", _compare_shell, methods=["GET"]),
        Route("/static/{name}", _static, methods=["GET"]),
        Route("/parts/runs", reads.route(parts.runs), methods=["GET"]),
        Route("/parts/run/{rest:path}", reads.route(parts.run), methods=["GET"]),
        Route("/parts/compare", reads.route(parts.compare), methods=["GET"]),
    ]


# -- the shells and static files: no data, no token -----------------------------------------


def _runs_shell(request: Request) -> Response:
    shell = _html.shell("runs", "/parts/runs", every_ms=_RUNS_EVERY_MS, filters=True)
    return HTMLResponse(shell)


def _run_shell(request: Request) -> Response:
    run_key = _run_of(request, b"/page/run/")
    part = "/parts/run/" + _html.run_path(run_key)
    names = (run_key.run_id, run_key.benchmark_id, run_key.model)
    heading = _html.names(*names)
    return HTMLResponse(
        _html.shell(" · ".join(names), part, every_ms=_RUN_EVERY_MS, heading=heading)
    )


def _compare_shell(request: Request) -> Response:
    query = request.scope["query_string"]
    a, b = compare_keys(query)
    part = "/parts/compare?" + query.decode("latin-1")
    title = f"{a.benchmark_id}: {a.run_id} against {b.run_id}"
    benchmark, run_a, run_b = map(_html.names, (a.benchmark_id, a.run_id, b.run_id))
    heading = f"{benchmark}: {run_a} against {run_b}"
    return HTMLResponse(_html.shell(title, part, every_ms=_RUN_EVERY_MS, heading=heading))


def _static(request: Request) -> Response:
    name = request.path_params["name"]
    files = _static_files()
    if name not in files:
        return Response(status_code=404)
    return Response(files[name], media_type=_STATIC[name])


# -- the parts the shells poll: data, behind the token ---------------------------------------


class _Parts:
    """The parts of the page, read from `source` and `samples` (each on the read pool)."""

    def __init__(
        self, source: SummarySource, samples: SampleCache, published: PublishedSummaries | None
    ) -> None:
        self._source = source
        self._samples = samples
        self._published = published

    def runs(self, request: Request, stop: threading.Event) -> Response:
        """The runs table, filtered by benchmark and model, newest first."""
        benchmark = request.query_params.get("benchmark") or None
        model = request.query_params.get("model") or None
        found = self._source.page()
        everything = found.summaries
        chosen = [
            s
            for s in everything
            if (benchmark is None or s.benchmark_id == benchmark)
            and (model is None or s.model == model)
        ]
        chosen.sort(key=_newest_first)
        chosen = chosen[:MAX_RUNS_SHOWN]
        body = _html.runs_part(
            chosen,
            _views(self._samples, chosen, stop),
            benchmarks=sorted({s.benchmark_id for s in everything}),
            models=sorted({s.model for s in everything}),
            query=request.scope["query_string"].decode("latin-1"),
            stale=found.stale,
            restoring=self._source.health().restoring_text(),
        )
        return HTMLResponse(body, headers=_NO_STORE)

    def run(self, request: Request, stop: threading.Event) -> Response:
        """One run: its summary, samples, and the other runs of its benchmark."""
        run_key = _run_of(request, b"/parts/run/")
        found = served(self._source, run_key, self._published)
        assert found.summary is not None
        summary = found.summary
        view = read_samples(self._samples, summary, stop)
        same_benchmark = self._source.page(where=RunFilter(benchmark=run_key.benchmark_id))
        others = [
            key
            for s in same_benchmark.summaries
            if (key := RunKey(s.run_id, s.benchmark_id, s.model)) != run_key
        ]
        body = _html.run_part(summary, view, others, stale=found.stale)
        return HTMLResponse(body, headers=_NO_STORE)

    def compare(self, request: Request, stop: threading.Event) -> Response:
        """Two runs of one benchmark, sample by sample."""
        query = request.scope["query_string"]
        keys = compare_keys(query)
        views = [
            read_samples(self._samples, served_summary(self._source, k, self._published), stop)
            for k in keys
        ]
        body = _html.compare_part(Comparison.of(*views), query.decode("latin-1"))
        return HTMLResponse(body, headers=_NO_STORE)


def _run_of(request: Request, prefix: bytes) -> RunKey:
    """The run key of `{prefix}{run_id}/{benchmark}/{model}`."""
    run_key, view = run_route(request.scope["raw_path"], prefix)
    if view is not None:
        raise BadRequestError(
            f"expected {prefix.decode()}{{run_id}}/{{benchmark}}/{{model}}, each segment "
            "percent-encoded (e.g. openai%2Fgpt-4o): found 4 segments, expected 3"
        )
    return run_key


def _newest_first(summary: RunSummary) -> tuple[float, str, str, str]:
    computed = summary.as_of.computed_at.timestamp() if summary.as_of is not None else 0.0
    return (-computed, summary.run_id, summary.benchmark_id, summary.model)


def _views(
    samples: SampleCache, summaries: list[RunSummary], stop: threading.Event
) -> dict[RunKey, RunSamples]:
    """The runs' views: those kept, and as many more as a second of reads allows (the rest
    show their interval on a later poll)."""
    deadline = time.monotonic() + _READ_BUDGET_S
    views: dict[RunKey, RunSamples] = {}
    for summary in summaries:
        view = samples.cached(summary)
        if view is None and time.monotonic() < deadline and not stop.is_set():
            try:
                view = samples.view(summary, stop)
            except ConsumerError:
                view = None
        if view is not None:
            views[view.run_key] = view
    return views
