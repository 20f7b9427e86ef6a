"""`/runs` pages with a cursor and says the total; paths accept what ordinary clients send."""

from __future__ import annotations

from urllib.parse import quote

import httpx

from resultlog.consumers.aggregator import run_key_from_path
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.aggregator import path, raw_get
from tests.support.kafka import write_many
from tests.support.records import make_record
from tests.support.waiting import wait_for

MODEL = "openai/gpt-4o"


def test_runs_past_a_thousand_are_paged_with_a_cursor_and_a_total(
    settings: Settings, base_url: str
) -> None:
    runs = [RunKey(f"run-{i:04d}", "arith" if i % 3 else "mmlu", MODEL) for i in range(1050)]
    write_many(settings, [make_record(0, 0, run_key=run_key) for run_key in runs])
    wait_for(
        lambda: httpx.get(base_url + "/runs?limit=1").headers["x-total-count"] == "1050",
        "1050 runs served",
    )
    seen: list[RunKey] = []
    url: str | None = base_url + "/runs?limit=1000"
    pages = 0
    while url is not None:
        response = httpx.get(url, timeout=30)
        assert response.status_code == 200
        assert response.headers["x-total-count"] == "1050"
        seen += [RunKey(s["run_id"], s["benchmark_id"], s["model"]) for s in response.json()]
        pages += 1
        link = response.links.get("next", {}).get("url")
        url = None if link is None else str(response.url.join(link))
        if link is not None:
            assert link.startswith("/runs?")  # relative: never built from the client's Host
            assert response.headers["x-next-cursor"] in link
    assert pages == 2
    assert seen == sorted(runs)  # every run once, in run key order

    filtered: list[str] = []
    cursor = None
    while True:
        params = {"benchmark": "mmlu", "limit": "100", **({"cursor": cursor} if cursor else {})}
        response = httpx.get(base_url + "/runs", params=params, timeout=30)
        assert response.headers["x-total-count"] == "350"
        filtered += [s["run_id"] for s in response.json()]
        cursor = response.headers.get("x-next-cursor")
        if cursor is None:
            break
    assert filtered == [r.run_id for r in sorted(runs) if r.benchmark_id == "mmlu"]


def test_a_cursor_that_was_not_given_out_is_400(base_url: str) -> None:
    for cursor in ("%%%", "bm90LWEta2V5", "A"):
        status, body = raw_get(base_url, f"/runs?cursor={cursor}")
        assert (status, body["error"]) == (400, "bad_request"), cursor


def test_paths_as_ordinary_clients_send_them_find_the_run(
    settings: Settings, base_url: str
) -> None:
    run_key = RunKey("exp(1)!*'~ A", "arith", MODEL)
    write_many(settings, [make_record(0, 0, run_key=run_key)])
    wait_for(lambda: httpx.get(base_url + path(run_key)).status_code == 200, "the run")
    js_encoded = quote(run_key.run_id, safe="()!*'~")  # what encodeURIComponent sends
    spellings = [
        path(run_key),  # canonical: exp%281%29%21%2A%27~%20A
        f"/runs/{js_encoded}/arith/openai%2fgpt-4o",  # lower-case escape
        f"/runs/{js_encoded}/%61rith/openai%2Fgpt-4o",  # a needless escape
        f"/runs/{quote(run_key.run_id, safe='')}/arith/openai%2Fgpt%2D4o",
    ]
    for raw_path in spellings:
        status, body = raw_get(base_url, raw_path)
        assert status == 200, (raw_path, body)
        assert (body["run_id"], body["benchmark_id"], body["model"]) == (
            run_key.run_id,
            "arith",
            MODEL,
        )


def test_run_key_parts_longer_than_the_command_line_allows_are_400(base_url: str) -> None:
    for raw_path in (
        "/runs/" + "a" * 257 + "/arith/m",
        "/runs/" + "%C3%A9" * 257 + "/arith/m",
        "/runs/r/arith/" + "m" * 5000,
    ):
        status, body = raw_get(base_url, raw_path)
        assert status == 400 and "longer than 256 characters" in body["detail"], raw_path
    status, _ = raw_get(base_url, "/runs/" + "a" * 256 + "/arith/m")
    assert status == 404


def test_run_key_from_path_decodes_any_escape_case() -> None:
    assert run_key_from_path(b"/runs/a%2fb/c(d)/e%2Af") == RunKey("a/b", "c(d)", "e*f")
