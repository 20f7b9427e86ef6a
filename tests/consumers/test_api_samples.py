"""Per-sample JSON of a real aggregator: a run's samples, run against run, the page's routes."""

from __future__ import annotations

import math
from collections.abc import Iterator

import httpx
import pytest

from resultlog.consumers._stats import wilson
from resultlog.consumers.aggregator import Aggregator
from resultlog.settings import Settings
from tests.support.aggregator import raw_get, serving
from tests.support.kafka import write
from tests.support.page import (
    OUTCOMES_A,
    OUTCOMES_B,
    RUN_A,
    RUN_B,
    compare_query,
    known_records,
    run_path,
)
from tests.support.waiting import wait_for

TOKEN = "s3cret-token-for-the-runs-page"


@pytest.fixture
def loaded(settings: Settings, base_url: str) -> str:
    """The API once runs A and B (known values) are served."""
    write(settings, known_records(RUN_A, OUTCOMES_A) + known_records(RUN_B, OUTCOMES_B))

    def both_done() -> bool:
        runs = httpx.get(base_url + "/runs").json()
        return [r["records"] for r in runs] == [8, 8]

    wait_for(both_done, "runs a and b")
    return base_url


def test_a_run_s_samples_hold_every_record_and_the_accuracy_interval(loaded: str) -> None:
    summary = httpx.get(f"{loaded}/runs/{run_path(RUN_A)}").json()
    body = httpx.get(f"{loaded}/runs/{run_path(RUN_A)}/samples").json()
    assert [body["run_id"], body["benchmark_id"], body["model"]] == [
        "page-a",
        "arith",
        "demo/model-a",
    ]
    assert body["shape"] == {"epochs": 2, "dataset_size": 4}
    accuracy = body["accuracy"]
    assert accuracy["mean"] == summary["accuracy"] == 0.5
    assert accuracy["n"] == summary["total_questions"] == 3
    assert accuracy["stderr"] == math.sqrt(1 / 12)
    assert accuracy["interval"] == "wilson"
    assert accuracy["ci_low"] == pytest.approx(wilson(0.5, 3)[0], abs=1e-15)
    assert 0.0 < accuracy["ci_low"] < 0.5 < accuracy["ci_high"] < 1.0
    assert [(e["epoch"], e["accuracy"]["mean"], e["skipped"]) for e in body["epochs"]] == [
        (0, 2 / 3, 1),
        (1, 1 / 3, 1),
    ]
    assert body["samples"] == [
        {"sample_id": "q0", "value": 1.0},
        {"sample_id": "q1", "value": 0.5},
        {"sample_id": "q2", "value": 0.0},
    ]
    assert body["skipped_samples"] == ["q3"]
    assert body["error_kinds"] == {"model_error": 2}
    records = body["records"]
    assert [(r["sample_id"], r["epoch"], r["value"]) for r in records] == [
        (f"q{i}", e, v) for i, values in enumerate(OUTCOMES_A) for e, v in enumerate(values)
    ]
    degraded = [r for r in records if r["degraded"]]
    assert [(r["error_kind"], r["http_status"]) for r in degraded] == [("model_error", 429)] * 2
    assert all(r["in_shape"] and r["created_at"].startswith("2026-01-01T") for r in records)


def test_run_against_run_pairs_shared_samples_and_names_the_flips(loaded: str) -> None:
    response = httpx.get(f"{loaded}/compare?{compare_query(RUN_A, RUN_B)}")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["benchmark_id"] == "arith" and body["shared"] == 3
    assert body["a"]["run_id"] == "page-a" and body["b"]["model"] == "demo/model-b"
    assert (body["a"]["only_here"], body["b"]["only_here"]) == (0, 1)
    assert body["a"]["shared_accuracy"]["mean"] == 0.5
    assert body["b"]["shared_accuracy"]["mean"] == 0.5
    assert body["b"]["accuracy"]["mean"] == 0.625  # q3 too: (0 + 1 + 1/2 + 1) / 4
    difference = body["difference"]
    assert (difference["n"], difference["mean"], difference["stderr"]) == (3, 0.0, 0.5)
    assert (difference["ci_low"], difference["ci_high"]) == (-0.98, 0.98)
    assert body["flips"] == {"c_to_i": ["q0"], "i_to_c": ["q2"]}
    assert body["mcnemar_p"] == 1.0  # one flip each way: as balanced as can be
    assert difference["interval"] == "clustered"  # two epochs: each sample one cluster
    assert body["samples"] == [
        {"sample_id": "q0", "a": 1.0, "b": 0.0, "difference": -1.0, "flip": "c_to_i"},
        {"sample_id": "q1", "a": 0.5, "b": 1.0, "difference": 0.5, "flip": None},
        {"sample_id": "q2", "a": 0.0, "b": 0.5, "difference": 0.5, "flip": "i_to_c"},
    ]
    swapped = httpx.get(f"{loaded}/compare?{compare_query(RUN_B, RUN_A)}").json()
    assert swapped["flips"] == {"c_to_i": ["q2"], "i_to_c": ["q0"]}
    assert swapped["difference"]["mean"] == 0.0


BAD = (
    "/compare",
    "/compare?a=page-a/arith/demo%2Fmodel-a",
    "/compare?a=page-a/arith/demo/model-a&b=page-b/arith/demo%2Fmodel-b",  # 4 segments
    "/compare?a=page-a%2Farith%2Fdemo%252Fmodel-a&b=page-b/arith/demo%2Fmodel-b",  # 1 segment
    "/compare?a=page-a/arith/demo%2Fmodel-a&b=page-b/mmlu/demo%2Fmodel-b",  # two benchmarks
    "/compare?a=page-a/arith/demo%zz&b=page-b/arith/demo%2Fmodel-b",
    "/compare?a=page-a/arith/demo%2Fmodel-a&a=page-a/arith/demo%2Fmodel-a&b=x/arith/y",
    "/runs/page-a/arith/demo%2Fmodel-a/other",
    "/runs/page-a/arith/demo%2Fmodel-a/samples/more",
    "/page/run/page-a/arith",
    "/page/compare?a=page-a/arith/demo%2Fmodel-a",
    "/parts/run/page-a/arith/demo%2Fmodel-a/samples",
)


def test_bad_input_is_400_as_json(loaded: str) -> None:
    for raw_path in BAD:
        status, body = raw_get(loaded, raw_path)
        assert (status, body["error"]) == (400, "bad_request"), raw_path
        assert "percent-encoded" in body["detail"] or "one benchmark" in body["detail"]


def test_unknown_runs_are_404_as_json(loaded: str) -> None:
    missing = "nope/arith/demo%2Fmodel-a"
    for raw_path in (
        f"/runs/{missing}/samples",
        f"/compare?a={run_path(RUN_A)}&b={missing}",
        f"/parts/run/{missing}",
    ):
        status, body = raw_get(loaded, raw_path)
        assert (status, body["error"]) == (404, "not_found"), raw_path
        assert "nope/arith/demo/model-a" in body["detail"]


def test_the_page_parts_show_the_json_figures(loaded: str) -> None:
    runs = httpx.get(loaded + "/parts/runs").text
    assert runs.count("<tr data-run=") == 2 and "page-a" in runs and "page-b" in runs
    low, high = wilson(0.5, 3)  # A: 0.5 over 3 questions (the normal one: [-0.0658, 1.0658])
    assert f"[{low:.4f}, {high:.4f}]" in runs and "[-0.0658, 1.0658]" not in runs
    assert "Wilson" in runs
    run = httpx.get(f"{loaded}/parts/run/{run_path(RUN_A)}").text
    assert "model_error: 2" in run and "<svg" in run and "0.6667" in run
    assert f"/page/compare?a={run_path(RUN_A)}&amp;b={run_path(RUN_B)}" in run
    compared = httpx.get(f"{loaded}/parts/compare?{compare_query(RUN_A, RUN_B)}").text
    assert "[-0.9800, 0.9800]" in compared and "q0" in compared
    assert 'McNemar exact test of the flips: p = <span class="mcnemar">1</span>' in compared
    assert "clustered by sample" in compared


@pytest.fixture
def guarded(aggregator: Aggregator) -> Iterator[str]:
    """The aggregator's HTTP API behind TOKEN, once caught up."""
    with serving(aggregator, TOKEN) as url:
        yield url


@pytest.mark.parametrize(
    "route",
    [
        f"/runs/{run_path(RUN_A)}/samples",
        f"/compare?{compare_query(RUN_A, RUN_B)}",
        "/parts/runs",
        f"/parts/run/{run_path(RUN_A)}",
        f"/parts/compare?{compare_query(RUN_A, RUN_B)}",
    ],
)
def test_data_routes_want_the_token(guarded: str, route: str) -> None:
    refused = httpx.get(guarded + route, timeout=5)
    assert refused.status_code == 401 and refused.json()["error"] == "unauthorized"
    allowed = httpx.get(guarded + route, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)
    assert allowed.status_code in (200, 404)  # in: the runs are not written here


@pytest.mark.parametrize(
    "route",
    [
        "/",
        f"/page/run/{run_path(RUN_A)}",
        f"/page/compare?{compare_query(RUN_A, RUN_B)}",
        "/static/page.js",
        "/static/page.css",
    ],
)
def test_shells_and_static_files_hold_no_data_and_need_no_token(guarded: str, route: str) -> None:
    answer = httpx.get(guarded + route, timeout=5)
    assert answer.status_code == 200
    assert "http://" not in answer.text and "https://" not in answer.text.replace(
        "http://www.w3.org/2000/svg", ""
    )  # nothing from elsewhere
    assert "/parts/" in answer.text or route.startswith("/static/")
