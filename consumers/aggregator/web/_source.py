"""What the HTTP routes serve from: the summary source, its runs, and their JSON errors."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Protocol, Unpack

from starlette.responses import JSONResponse, Response

from resultlog.consumers._samples import RunSamples
from resultlog.consumers.aggregator._health import Health
from resultlog.consumers.aggregator._state import Lookup, RunsPage, RunsQuery
from resultlog.consumers.aggregator.web._paths import describe
from resultlog.consumers.aggregator.web._published import PublishedSummaries
from resultlog.consumers.aggregator.web._samples import SampleCache
from resultlog.consumers.errors import ConsumerError
from resultlog.consumers.resume import RunRecords
from resultlog.schemas import RunKey, RunSummary

__all__ = [
    "NotServedError",
    "SummarySource",
    "error",
    "read_samples",
    "served",
    "served_summary",
    "summary_json",
]


class SummarySource(Protocol):
    """What the API serves (the Aggregator is one)."""

    def lookup(self, run_key: RunKey) -> Lookup:
        """One run's current summary."""
        ...

    def page(self, **query: Unpack[RunsQuery]) -> RunsPage:
        """A page of the current summaries `query` asks for, and how many match in all."""
        ...

    def health(self) -> Health:
        """Readiness and lag."""
        ...

    def exposition(self) -> tuple[bytes, str]:
        """Prometheus text exposition and its content type."""
        ...

    def run_records(self, run_key: RunKey, stop: threading.Event | None = None) -> RunRecords:
        """The run key's latest records, read from the log now (until `stop` is set)."""
        ...


_RETRY = {"Retry-After": "1"}


class NotServedError(ConsumerError):
    """A run the API cannot answer for (404 or 503), with its JSON response."""

    def __init__(self, response: Response) -> None:
        super().__init__("run not served")
        self.response = response


def error(
    status: int, kind: str, detail: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """The API's JSON error: `{"error": kind, "detail": ...}`."""
    return JSONResponse({"error": kind, "detail": detail}, status_code=status, headers=headers)


def served_summary(
    source: SummarySource, run_key: RunKey, published: PublishedSummaries | None = None
) -> RunSummary:
    """The run's current summary; NotServedError (404, or 503 while rebuilding) otherwise."""
    found = served(source, run_key, published)
    assert found.summary is not None
    return found.summary


def summary_json(summary: RunSummary, *, stale: bool) -> bytes:
    """A summary's JSON, with `"stale": true` first when it is the summaries topic's, served
    while no instance holds its partition fresh."""
    body = summary.model_dump_json().encode()
    return b'{"stale":true,' + body[1:] if stale else body


def served(
    source: SummarySource, run_key: RunKey, published: PublishedSummaries | None = None
) -> Lookup:
    """The run's lookup, if it has a summary; NotServedError (404, or 503) otherwise.

    While this instance does not hold the run's partition fresh (not assigned here, or
    restoring), the summaries topic's value is served marked stale (from `published`): in a
    hand-over no instance may hold it for a while, and a run that exists is never 404.
    """
    found = source.lookup(run_key)
    if found.summary is not None:
        return found
    if published is not None and (found.rebuilding or not found.assigned):
        try:
            summary = published.summary(run_key)
        except ConsumerError as exc:  # absent or not, it cannot say: never a 404
            raise NotServedError(error(503, "unavailable", str(exc), _RETRY)) from exc
        if summary is not None:
            return dataclasses.replace(found, summary=summary, stale=True)
    if found.rebuilding:
        detail = f"partition {found.partition} is still being rebuilt; retry shortly"
        raise NotServedError(error(503, "rebuilding", detail, headers=_RETRY))
    where = "" if found.assigned else f" (partition {found.partition} is not served here)"
    raise NotServedError(error(404, "not_found", f"no run {describe(run_key)}{where}"))


def read_samples(
    samples: SampleCache, summary: RunSummary, stop: threading.Event | None = None
) -> RunSamples:
    """The run's per-sample view; NotServedError (503) when the log cannot be read."""
    try:
        return samples.view(summary, stop)
    except ConsumerError as exc:
        raise NotServedError(error(503, "unavailable", str(exc), _RETRY)) from exc
