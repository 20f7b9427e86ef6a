"""The runs page in a real browser against a real aggregator: the numbers equal the JSON's,
the page follows a run that is writing, run against run is right for known flips.

Screenshots of the three pages go to test-artifacts/page/ (git-ignored).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from pydantic import SecretStr

from resultlog.consumers.aggregator import Aggregator, HttpServer, create_app
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.browser import outside_the_browser_loop, screenshot_path, tab
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
from tests.support.records import make_record
from tests.support.waiting import wait_for

# The slow tier: a headless Chromium drives the page.
pytestmark = pytest.mark.slow

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

TIMEOUT_MS = 30_000
TOKEN = "s3cret-token-for-the-runs-page"
ODD = RunKey("odd run/é", "arith", "openai/gpt-4o")  # a key that needs percent-encoding


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh browser tab of 1280 x 800."""
    # bypass_csp: wait_for_function evaluates its expressions as strings, which the page's
    # CSP forbids (test_page_fit_browser runs the pages under their CSP).
    with tab(browser, TIMEOUT_MS, viewport={"width": 1280, "height": 800}, bypass_csp=True) as new:
        yield new


@pytest.fixture
def loaded(settings: Settings, base_url: str) -> str:
    """The API once runs A, B (known values) and one with an odd key are served."""
    odd = [
        make_record(i, 0, "CI"[i % 3 == 2], run_key=ODD, epochs=1, dataset_size=6) for i in range(6)
    ]
    both = known_records(RUN_A, OUTCOMES_A) + known_records(RUN_B, OUTCOMES_B)
    outside_the_browser_loop(write, settings, both + odd)

    def all_written() -> bool:
        return sorted(r["records"] for r in httpx.get(base_url + "/runs").json()) == [6, 8, 8]

    wait_for(all_written, "three runs")
    return base_url


def rows(page: Page) -> dict[str, dict[str, str]]:
    """The runs table as the browser shows it: per run path, each cell's text by class."""
    return page.eval_on_selector_all(  # type: ignore[no-any-return]
        "table.runs tbody tr[data-run]",
        """trs => Object.fromEntries(trs.map(tr => [tr.dataset.run, Object.fromEntries(
            Array.from(tr.querySelectorAll('td[class]'), td => [td.className, td.innerText.trim()])
        )]))""",
    )


def expected_row(summary: dict[str, Any], samples: dict[str, Any]) -> dict[str, str]:
    """A runs-table row as the JSON routes give its figures."""
    accuracy = samples["accuracy"]
    usage = summary["usage"]
    return {
        "run": summary["run_id"],
        "benchmark": summary["benchmark_id"],
        "model": summary["model"],
        "progress": f"{summary['records']} / {summary['expected_records']}",
        "accuracy": f"{summary['accuracy']:.4f}",
        "ci": f"[{accuracy['ci_low']:.4f}, {accuracy['ci_high']:.4f}]",
        "correct": f"{summary['correct_answers']} / {summary['total_questions']}",
        "skipped": str(summary["skipped_questions"]),
        "degraded": str(summary["degraded_records"]),
        "spent": f"${summary['spent_cost']:.6f}",
        "kept": f"${usage['total_cost']:.6f}",
        "tokens": f"{usage['total_tokens']:,}",
        "updated": summary["as_of"]["computed_at"][:19].replace("T", " "),
    }


def test_the_runs_page_shows_what_the_json_routes_say(loaded: str, page: Page) -> None:
    page.goto(loaded + "/")
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length === 3")
    page.wait_for_function("!document.querySelector('td.ci .pending')")
    shown = rows(page)
    summaries = httpx.get(loaded + "/runs").json()
    assert len(summaries) == 3
    for summary in summaries:
        path = run_path(RunKey(summary["run_id"], summary["benchmark_id"], summary["model"]))
        samples = httpx.get(f"{loaded}/runs/{path}/samples").json()
        assert shown[path] == expected_row(summary, samples), path
    newest_first = sorted(summaries, key=lambda s: s["as_of"]["computed_at"], reverse=True)
    order = page.eval_on_selector_all("tr[data-run] td.run", "tds => tds.map(t => t.innerText)")
    assert [s["run_id"] for s in newest_first] == order or len(
        {s["as_of"]["computed_at"] for s in summaries}
    ) < 3  # equal timestamps: any order among them
    assert page.locator("progress").count() == 3
    page.screenshot(path=screenshot_path("runs"), full_page=True)

    page.select_option("#filters select[name=model]", "openai/gpt-4o")
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length === 1")
    assert list(rows(page)) == [run_path(ODD)]
    assert "model=openai%2Fgpt-4o" in page.url
    page.select_option("#filters select[name=model]", "")
    page.select_option("#filters select[name=benchmark]", "arith")
    page.wait_for_function("document.querySelectorAll('tr[data-run]').length === 3")


def test_a_run_s_page_shows_epochs_the_grid_and_degraded_records(loaded: str, page: Page) -> None:
    page.goto(f"{loaded}/page/run/{run_path(RUN_A)}")
    page.wait_for_selector("table.epochs")
    samples = httpx.get(f"{loaded}/runs/{run_path(RUN_A)}/samples").json()
    epochs = page.eval_on_selector_all(
        "table.epochs tbody tr", "trs => trs.map(tr => tr.innerText.split('\\t'))"
    )
    assert epochs == [
        [
            str(e["epoch"]),
            f"{e['accuracy']['mean']:.4f}",
            f"[{e['accuracy']['ci_low']:.4f}, {e['accuracy']['ci_high']:.4f}]",
            str(e["accuracy"]["n"]),
            str(e["skipped"]),
        ]
        for e in samples["epochs"]
    ]
    assert epochs[0][:2] == ["0", "0.6667"] and epochs[1][:2] == ["1", "0.3333"]
    grid = page.eval_on_selector_all(
        "svg[aria-label^='samples by epochs'] rect", "rs => rs.map(r => r.getAttribute('class'))"
    )
    assert grid == ["c", "c", "c", "i", "i", "i", "s", "s"]  # per sample, its epochs
    assert page.inner_text("p.kinds") == "2 degraded · model_error: 2"
    assert page.locator("table.degraded tbody tr").count() == 2
    assert page.locator("svg[aria-label='records over time'] polyline").count() == 1
    links = page.eval_on_selector_all("a.json", "as => as.map(a => a.getAttribute('href'))")
    assert f"/runs/{run_path(RUN_A)}/samples" in links and f"/runs/{run_path(RUN_A)}" in links
    others = page.eval_on_selector_all("ul.others a", "as => as.map(a => a.getAttribute('href'))")
    assert f"/page/compare?{compare_query(RUN_A, RUN_B)}" in others and len(others) == 2
    page.screenshot(path=screenshot_path("run"), full_page=True)


def test_run_against_run_shows_the_paired_difference_and_the_flips(loaded: str, page: Page) -> None:
    page.goto(f"{loaded}/page/compare?{compare_query(RUN_A, RUN_B)}")
    page.wait_for_selector("table.compare")
    body = httpx.get(f"{loaded}/compare?{compare_query(RUN_A, RUN_B)}").json()
    difference = page.eval_on_selector(
        "table.compare tr.difference",
        "tr => [tr.querySelector('.accuracy').innerText, tr.querySelector('.ci').innerText]",
    )
    assert difference == ["0.0000", "[-0.9800, 0.9800]"]
    assert body["difference"]["mean"] == 0.0 and body["difference"]["ci_high"] == 0.98
    sides = page.eval_on_selector_all(
        "table.compare tr.a .accuracy, table.compare tr.b .accuracy",
        "tds => tds.map(t => t.innerText)",
    )
    assert sides == [f"{body[s]['shared_accuracy']['mean']:.4f}" for s in ("a", "b")]
    assert page.inner_text("p.flips.c_to_i") == "C→I 1: q0"
    assert page.inner_text("p.flips.i_to_c") == "I→C 1: q2"
    table = page.eval_on_selector_all(
        "table.differences tbody tr", "trs => trs.map(tr => tr.innerText.split('\\t'))"
    )
    assert table == [
        ["q0", "1.0000", "0.0000", "-1.0000", "C→I"],
        ["q1", "0.5000", "1.0000", "+0.5000", ""],
        ["q2", "0.0000", "0.5000", "+0.5000", "I→C"],
    ]
    assert page.inner_text("span.shared") == "3"
    assert page.locator("svg[aria-label^='accuracies and their paired difference']").count() == 1
    page.screenshot(path=screenshot_path("compare"), full_page=True)


def test_the_runs_page_follows_a_run_that_is_writing(
    settings: Settings, base_url: str, page: Page
) -> None:
    page.goto(base_url + "/")
    page.wait_for_selector("td.empty")
    page.evaluate("window.notReloaded = true")
    run_key = RunKey("live", "arith", "demo/model")
    records = [
        make_record(i, 0, "C", run_key=run_key, epochs=1, dataset_size=30) for i in range(30)
    ]
    seen: list[str] = []
    for batch in range(3):
        outside_the_browser_loop(write, settings, records[batch * 10 : (batch + 1) * 10])
        wanted = str((batch + 1) * 10)
        page.wait_for_function(
            "n => (document.querySelector('td.progress .records') || {}).innerText === n",
            arg=wanted,
        )
        seen.append(page.inner_text("td.progress").strip())
        assert page.evaluate("window.notReloaded") is True
    assert seen == ["10 / 30", "20 / 30", "30 / 30"]
    assert page.get_attribute("progress", "value") == "30"


@pytest.fixture
def guarded(aggregator: Aggregator, settings: Settings) -> Iterator[str]:
    """The aggregator's HTTP API behind TOKEN, once run A is written and served."""
    server = HttpServer(create_app(aggregator, token=SecretStr(TOKEN)), "127.0.0.1", 0)
    server.start_in_thread()
    outside_the_browser_loop(write, settings, known_records(RUN_A, OUTCOMES_A))
    wait_for(lambda: aggregator.lookup(RUN_A).summary, "run A")
    try:
        yield server.url
    finally:
        server.close()


def test_behind_a_token_the_page_asks_for_it_once(guarded: str, page: Page) -> None:
    page.goto(guarded + "/")
    page.wait_for_selector("form#token:not([hidden])")
    page.fill("form#token input", "not-the-token-at-all")
    page.click("form#token button")
    page.wait_for_selector("form#token:not([hidden]) .refused:not([hidden])")
    page.fill("form#token input", TOKEN)
    page.click("form#token button")
    page.wait_for_selector("tr[data-run]")
    assert page.is_hidden("form#token")
    page.goto(f"{guarded}/page/run/{run_path(RUN_A)}")  # the same tab: asked once
    page.wait_for_selector("table.epochs")
    assert page.is_hidden("form#token")
    page.click(f"a.json[href='/runs/{run_path(RUN_A)}/samples']")
    page.wait_for_selector("dialog#json[open]")
    assert '"accuracy"' in page.inner_text("dialog#json pre")
