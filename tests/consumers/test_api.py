"""The HTTP read API of a real aggregator: raw paths, filters, errors, health and metrics."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from resultlog.consumers import fold_records
from resultlog.consumers.aggregator import (
    Aggregator,
    BadRequestError,
    HttpServer,
    create_app,
    run_key_from_path,
)
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.aggregator import path, raw_get
from tests.support.kafka import write
from tests.support.records import make_record
from tests.support.summaries import bare
from tests.support.waiting import wait_for

RUNS = [
    RunKey("run 1/é", "arith", "openai/gpt-4o"),
    RunKey("r2", "mmlu", "openai/gpt-4o"),
    RunKey("r2", "arith", "anthropic/claude-3.5"),
]


@pytest.fixture
def loaded(settings: Settings, base_url: str) -> str:
    """The API once three runs (encoded names included) are served."""
    write(settings, [make_record(i, 0, "CI"[i % 2], run_key=k) for k in RUNS for i in range(4)])
    wait_for(lambda: len(httpx.get(base_url + "/runs").json()) == len(RUNS), "three runs")
    return base_url


def test_a_run_is_served_under_its_percent_encoded_path(loaded: str) -> None:
    for run_key in RUNS:
        response = httpx.get(loaded + path(run_key))
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        body = response.json()
        records = [make_record(i, 0, "CI"[i % 2], run_key=run_key) for i in range(4)]
        assert bare(body) == bare(fold_records(records))
        assert body["as_of"]["source"] == "aggregator"
    assert path(RUNS[0]) == "/runs/run%201%2F%C3%A9/arith/openai%2Fgpt-4o"


def test_listing_filters_and_limits(loaded: str) -> None:
    def names(**params: str) -> list[tuple[str, str, str]]:
        response = httpx.get(loaded + "/runs", params=params)
        assert response.status_code == 200
        return [(s["run_id"], s["benchmark_id"], s["model"]) for s in response.json()]

    everything = names()
    assert everything == sorted((k.run_id, k.benchmark_id, k.model) for k in RUNS)
    assert len(names(model="openai/gpt-4o")) == 2
    assert names(run_id="r2", benchmark="mmlu") == [("r2", "mmlu", "openai/gpt-4o")]
    assert names(limit="1") == everything[:1]
    assert names(run_id="nope") == []


def test_bad_listing_parameters_are_400(loaded: str) -> None:
    for query in ("limit=0", "limit=1001", "limit=abc", "limit=-1", "limit=", "run_id=", "model="):
        status, body = raw_get(loaded, f"/runs?{query}")
        assert (status, body["error"]) == (400, "bad_request"), query


def test_an_unknown_run_is_404_with_a_json_error(loaded: str) -> None:
    status, body = raw_get(loaded, "/runs/nope/arith/openai%2Fgpt-4o")
    assert status == 404
    assert body["error"] == "not_found" and "nope/arith/openai/gpt-4o" in body["detail"]


MALFORMED = (
    "/runs/",
    "/runs/r2/mmlu",
    "/runs/r2/mmlu/openai/gpt-4o",  # an unencoded '/' makes a fourth segment
    "/runs/r2//openai%2Fgpt-4o",
    "/runs/r2/mmlu/openai%2Fgpt-4o/",
    "/runs/r2/mmlu/openai%zzgpt",
)


def test_a_malformed_path_is_400(loaded: str) -> None:
    for raw_path in MALFORMED:
        status, body = raw_get(loaded, raw_path)
        assert (status, body["error"]) == (400, "bad_request"), raw_path
        assert "percent-encoded" in body["detail"]


def test_other_routes_and_methods_answer_json(loaded: str) -> None:
    status, body = raw_get(loaded, "/nothing-here")
    assert status == 404 and body["error"] == "http_error"
    response = httpx.post(loaded + "/runs")
    assert response.status_code == 405 and response.json()["error"] == "http_error"


def test_healthz_reports_readiness_and_per_partition_lag(settings: Settings, loaded: str) -> None:
    response = httpx.get(loaded + "/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["ready"] is True and body["status"] == "ready"
    assert set(body["partitions"]) == {str(p) for p in range(settings.partitions)}
    partition = next(iter(body["partitions"].values()))
    assert set(partition) == {"position", "high_watermark", "lag", "caught_up", "runs", "restoring"}
    assert body["restoring"] == {} and partition["restoring"] is False
    assert sum(p["runs"] for p in body["partitions"].values()) == len(RUNS)


def test_healthz_is_503_until_the_aggregator_runs(settings: Settings) -> None:
    idle = Aggregator(KafkaConnection(settings))
    server = HttpServer(create_app(idle), "127.0.0.1", 0)
    server.start_in_thread()
    try:
        response = httpx.get(server.url + "/healthz")
        assert response.status_code == 503 and response.json()["ready"] is False
    finally:
        server.close()


def test_metrics_are_prometheus_text(loaded: str) -> None:
    response = httpx.get(loaded + "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }
    assert samples[("resultlog_aggregator_records_consumed_total", ())] == 4 * len(RUNS)
    assert samples[("resultlog_aggregator_runs_tracked", ())] == len(RUNS)
    assert samples[("resultlog_aggregator_rebuilds_total", ())] == 3
    assert samples[("resultlog_aggregator_ready", ())] == 1
    assert samples[("resultlog_aggregator_dead_lettered_total", (("reason", "bad_key"),))] == 0
    lags = [v for (name, _), v in samples.items() if name == "resultlog_aggregator_consumer_lag"]
    assert lags == [0, 0, 0]
    published = wait_for(
        lambda: _sample(loaded, "resultlog_aggregator_summaries_published_total"), "a publish"
    )
    assert published >= len(RUNS)


def test_run_key_from_path_uses_the_key_rules() -> None:
    assert run_key_from_path(b"/runs/a%20b/c/openai%2Fgpt-4o?x=1") == RunKey(
        "a b", "c", "openai/gpt-4o"
    )
    for bad in (b"/run/a/b/c", b"/runs/a/b", b"/runs/a/b/%C3"):
        with pytest.raises(BadRequestError):
            run_key_from_path(bad)


def _sample(base_url: str, name: str) -> float | None:
    for family in text_string_to_metric_families(httpx.get(base_url + "/metrics").text):
        for sample in family.samples:
            if sample.name == name and sample.value:
                return sample.value
    return None
