"""A running aggregator on a test's topics, its HTTP API, and what it serves."""

from __future__ import annotations

import contextlib
import http.client
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from resultlog.consumers.aggregator import Aggregator, HttpServer, create_app
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, encode_run_key
from resultlog.settings import Settings
from tests.support.summaries import Summary, bare
from tests.support.waiting import wait_for


@contextlib.contextmanager
def running(settings: Settings, group_id: str | None = None) -> Iterator[Aggregator]:
    """A running aggregator (default group: the settings'), publishing every 50 ms."""
    kafka = KafkaConnection(settings)
    with Aggregator(kafka, group_id=group_id, publish_interval_s=0.05) as aggregator:
        yield aggregator
    assert aggregator.failure is None, aggregator.failure


@contextlib.contextmanager
def started(
    settings: Settings, state_dir: Path, instance_id: str | None = None
) -> Iterator[Aggregator]:
    """A started aggregator keeping its state under `state_dir` (`instance_id`: a static
    member of that name), stopped cleanly on exit."""
    kafka = KafkaConnection(settings)
    aggregator = Aggregator(
        kafka, publish_interval_s=0.05, instance_id=instance_id, state_dir=state_dir
    )
    aggregator.start()
    try:
        yield aggregator
    finally:
        aggregator.stop()
    assert aggregator.failure is None, aggregator.failure


def metric(aggregator: Aggregator, name: str, **labels: str) -> float:
    """The value of one of the aggregator's metrics (0 when it has none yet)."""
    value = aggregator.metrics.registry.get_sample_value(f"resultlog_aggregator_{name}", labels)
    return value or 0.0


@contextlib.contextmanager
def serving(aggregator: Aggregator, token: str | None = None) -> Iterator[str]:
    """The aggregator's HTTP API on a free port (behind `token` if given), once every
    partition is caught up (before, a run's routes answer 503)."""
    secret = None if token is None else SecretStr(token)
    server = HttpServer(create_app(aggregator, token=secret), "127.0.0.1", 0)
    server.start_in_thread()
    try:
        health = aggregator.health
        wait_for(lambda: health().ready, f"readiness (failure {aggregator.failure!r})")
        yield server.url
    finally:
        server.close()


@contextlib.contextmanager
def serving_aggregator(settings: Settings) -> Iterator[tuple[Aggregator, str]]:
    """An aggregator in a group of its own and its HTTP API, once caught up."""
    group = f"{settings.aggregator_group}.{uuid.uuid4().hex[:8]}"
    with running(settings, group) as aggregator, serving(aggregator) as url:
        yield aggregator, url


def path(run_key: RunKey) -> str:
    """The HTTP path of a run: each segment percent-encoded as in keys."""
    return "/runs/" + encode_run_key(run_key).decode()


def served(base_url: str, run_key: RunKey) -> Summary | None:
    """The run's summary over HTTP without as_of, or None until it is there."""
    response = httpx.get(base_url + path(run_key), timeout=5)
    return bare(response.json()) if response.status_code == 200 else None


def raw_get(base_url: str, raw_path: str) -> tuple[int, Any]:
    """GET a path byte for byte (httpx would normalise or re-encode it) and parse the JSON."""
    parts = urlsplit(base_url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
    try:
        connection.request("GET", raw_path)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def held(aggregator: Aggregator, run_key: RunKey) -> Summary | None:
    """The aggregator's summary of the run without as_of, or None while it has none."""
    summary = aggregator.lookup(run_key).summary
    return None if summary is None else bare(summary)
