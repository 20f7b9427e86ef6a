"""The runs page judged by a real Chromium: filters from the URL, tables that fit a 1400 px
window, one time zone, names that keep their order, and a page that runs under its own CSP.

Screenshots go to test-artifacts/page/ (git-ignored).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from urllib.parse import quote

import httpx
import pytest

from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.browser import outside_the_browser_loop, screenshot_path, tab
from tests.support.kafka import write
from tests.support.page import OUTCOMES_A, OUTCOMES_B, RUN_A, RUN_B, known_records, run_path
from tests.support.waiting import wait_for

# The slow tier: a headless Chromium drives the page.
pytestmark = pytest.mark.slow

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

TIMEOUT_MS = 30_000
WIDTH = 1400
# Long names without spaces: before, every cell kept its text on one line and pushed the
# numbers off screen.
LONG = RunKey("long-" + "r" * 120, "bench-" + "b" * 100, "provider/" + "m" * 150)
# A right-to-left run id next to a benchmark of digits: unisolated, the digits are drawn
# before the run id ("123 · אבג").
RTL = RunKey("אבג", "123", "demo/model-rtl")
ROWS = "document.querySelectorAll('tr[data-run]').length"
# The text of each line a cell's text takes, in order.
_LINE_TEXTS = """td => {
    const lines = new Map();
    const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (let i = 0; i < node.data.length; i++) {
            const range = document.createRange();
            range.setStart(node, i);
            range.setEnd(node, i + 1);
            const top = Math.round(range.getBoundingClientRect().top);
            lines.set(top, (lines.get(top) || '') + node.data[i]);
        }
    }
    return Array.from(lines.keys()).sort((a, b) => a - b).map(top => lines.get(top));
}"""
# The line boxes a cell's text takes (each line of an inline box is one client rect).
_LINES = """td => {
    const range = document.createRange();
    range.selectNodeContents(td);
    const tops = new Set(Array.from(range.getClientRects(), r => Math.round(r.top)));
    return tops.size;
}"""


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A tab of a 1400 px window whose local time zone is not UTC."""
    # bypass_csp: wait_for_function evaluates its expressions as strings, which the page's CSP
    # forbids; `strict_page` is the page under its own CSP.
    window = {"width": WIDTH, "height": 900}
    zone = "America/Los_Angeles"
    with tab(browser, TIMEOUT_MS, viewport=window, timezone_id=zone, bypass_csp=True) as new:
        yield new


@pytest.fixture
def loaded(settings: Settings, base_url: str) -> str:
    """The API once runs A, B, one with long names and one with a right-to-left id are served."""
    extra = [
        record
        for run_key in (LONG, RTL)
        for record in known_records(run_key, OUTCOMES_A, offset_ms=500)
    ]
    records = known_records(RUN_A, OUTCOMES_A) + known_records(RUN_B, OUTCOMES_B) + extra
    outside_the_browser_loop(write, settings, records)
    wait_for(lambda: len(httpx.get(base_url + "/runs").json()) == 4 or None, "four runs")
    return base_url


def _run_ids(page: Page) -> list[str]:
    return page.eval_on_selector_all(  # type: ignore[no-any-return]
        "tr[data-run] td.run", "tds => tds.map(td => td.innerText)"
    )


def test_a_filter_in_the_url_is_applied_on_load_and_reload(loaded: str, page: Page) -> None:
    page.goto(f"{loaded}/?model={quote(RUN_A.model, safe='')}")
    page.wait_for_function(f"{ROWS} === 1")
    assert _run_ids(page) == [RUN_A.run_id]
    assert page.eval_on_selector("#filters select[name=model]", "s => s.value") == RUN_A.model
    page.wait_for_function("document.querySelector('#filters select[name=model]').length > 2")
    assert page.eval_on_selector("#filters select[name=model]", "s => s.value") == RUN_A.model
    page.reload()
    page.wait_for_function(f"{ROWS} === 1")
    assert _run_ids(page) == [RUN_A.run_id]
    page.goto(f"{loaded}/?benchmark=arith&model={quote(RUN_B.model, safe='')}")
    page.wait_for_function(f"{ROWS} === 1")
    assert _run_ids(page) == [RUN_B.run_id]
    page.select_option("#filters select[name=model]", "")
    page.wait_for_function(f"{ROWS} === 2")  # A and B: the benchmark filter still holds


def _overflow(page: Page) -> dict[str, float]:
    """How far the page and each table's last cells reach past the window's right edge."""
    return page.evaluate(  # type: ignore[no-any-return]
        """() => {
            const width = document.documentElement.clientWidth;
            const found = {page: document.documentElement.scrollWidth - width};
            document.querySelectorAll('table').forEach((table, i) => {
                const cells = table.querySelectorAll('tr > :last-child');
                const right = Math.max(...Array.from(cells, c => c.getBoundingClientRect().right));
                found['table' + i + '.' + table.className] = right - width;
            });
            return found;
        }"""
    )


def test_the_tables_fit_a_1400_px_window_and_long_names_wrap(loaded: str, page: Page) -> None:
    page.goto(loaded + "/")
    page.wait_for_function(f"{ROWS} === 4")
    page.wait_for_function("!document.querySelector('td.ci .pending')")
    page.screenshot(path=screenshot_path("runs-1400"), full_page=True)
    assert all(reach <= 0 for reach in _overflow(page).values()), _overflow(page)
    long_row = f"tr[data-run='{run_path(LONG)}']"
    numbers = page.eval_on_selector_all(
        f"{long_row} td.accuracy, {long_row} td.tokens, {long_row} td.updated",
        "tds => tds.map(td => [td.getBoundingClientRect().right, td.getClientRects().length])",
    )
    assert len(numbers) == 3 and all(right <= WIDTH for right, _ in numbers), numbers
    for cell in ("accuracy", "tokens", "updated"):  # numbers and times on one line each
        assert page.eval_on_selector(f"{long_row} td.{cell}", _LINES) == 1, cell
    # The long model name wrapped instead of widening the table.
    assert page.eval_on_selector(f"{long_row} td.model", _LINES) >= 2
    for run_key in (RUN_A, LONG):
        page.goto(f"{loaded}/page/run/{run_path(run_key)}")
        page.wait_for_selector("table.epochs")
        page.wait_for_selector("table.degraded")
        assert all(reach <= 0 for reach in _overflow(page).values()), (run_key, _overflow(page))
    page.screenshot(path=screenshot_path("run-1400"), full_page=True)


def test_short_names_stay_whole_and_the_grid_is_explained(loaded: str, page: Page) -> None:
    # Before, "demo/model-a" wrapped mid-word ("demo/mode" / "l-a") to make room for numbers.
    page.goto(loaded + "/")
    page.wait_for_function(f"{ROWS} === 4")
    row = f"tr[data-run='{run_path(RUN_A)}']"
    for cell in ("run", "benchmark", "model"):
        assert page.eval_on_selector(f"{row} td.{cell}", _LINES) == 1, cell
    page.goto(f"{loaded}/page/run/{run_path(RUN_A)}")
    page.wait_for_selector("table.epochs")
    assert page.eval_on_selector("section.summary td.model", _LINES) == 1
    assert page.inner_text("section.summary td.model") == RUN_A.model
    legend = page.inner_text("p.grid-legend")
    assert "its epochs from top to bottom" in legend
    assert "the number left of a row is the index of its first sample" in legend
    labels = page.eval_on_selector_all(
        "svg[aria-label^='samples by epochs'] text", "ts => ts.map(t => t.textContent)"
    )
    assert labels == ["0"]  # a few samples: one row, whose first sample is sample 0
    # In a window too narrow for the names, a short one wraps after its "/", not mid-word.
    page.set_viewport_size({"width": 700, "height": 900})
    page.goto(loaded + "/")
    page.wait_for_function(f"{ROWS} === 4")
    lines = page.eval_on_selector(f"{row} td.model", _LINE_TEXTS)
    assert "".join(lines) == RUN_A.model
    assert lines == ["demo/", "model-a"], lines


def test_one_time_zone_said_everywhere(loaded: str, page: Page) -> None:
    page.goto(loaded + "/")
    page.wait_for_function(f"{ROWS} === 4")
    page.wait_for_function("/updated/.test(document.getElementById('status').innerText)")
    status = page.inner_text("#status")
    match = re.fullmatch(r"updated (\d\d):(\d\d):(\d\d) UTC", status)
    assert match is not None, status
    hour, minute, second = map(int, match.groups())
    now = datetime.now(UTC)
    shown = now.replace(hour=hour, minute=minute, second=second, microsecond=0)
    assert min(abs(shown - now + timedelta(days=d)) for d in (-1, 0, 1)) < timedelta(minutes=2)
    local = page.evaluate("() => new Date().getTimezoneOffset()")
    assert local != 0  # the browser's own zone differs: the status did not use it
    headers = page.eval_on_selector_all("table.runs th", "ths => ths.map(th => th.innerText)")
    assert "last update (UTC)" in headers
    updated = page.inner_text(f"tr[data-run='{run_path(RUN_A)}'] td.updated")
    summary = httpx.get(f"{loaded}/runs/{run_path(RUN_A)}").json()
    assert updated == summary["as_of"]["computed_at"][:19].replace("T", " ")  # UTC as well


def _left_of(page: Page, selector: str, first: str, second: str) -> bool:
    """Whether the browser draws `first` to the left of `second` inside `selector`."""
    return page.eval_on_selector(  # type: ignore[no-any-return]
        selector,
        """(root, [first, second]) => {
            const box = (text) => {
                const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
                for (let node = walker.nextNode(); node; node = walker.nextNode()) {
                    const at = node.data.indexOf(text);
                    if (at >= 0) {
                        const range = document.createRange();
                        range.setStart(node, at);
                        range.setEnd(node, at + text.length);
                        return range.getBoundingClientRect();
                    }
                }
                throw new Error('not shown: ' + text);
            };
            return box(first).right <= box(second).left;
        }""",
        [first, second],
    )


def test_a_right_to_left_name_does_not_reorder_its_neighbours(loaded: str, page: Page) -> None:
    page.goto(f"{loaded}/page/run/{run_path(RTL)}")
    page.wait_for_selector("table.epochs")
    assert _left_of(page, "header .title", RTL.run_id, RTL.benchmark_id)
    # "model-rtl": a <wbr> after the "/" splits the name into two text nodes.
    assert _left_of(page, "header .title", RTL.benchmark_id, "model-rtl")
    page.screenshot(path=screenshot_path("run-rtl"), full_page=True)


@pytest.fixture
def strict_page(browser: Browser) -> Iterator[Page]:
    """A tab that enforces the pages' CSP (only selectors are waited for: no eval)."""
    with tab(browser, TIMEOUT_MS, viewport={"width": WIDTH, "height": 900}) as new:
        yield new


def test_the_pages_run_under_their_csp(loaded: str, strict_page: Page) -> None:
    page = strict_page
    violations: list[str] = []
    page.on("console", lambda message: violations.append(message.text))
    page.add_init_script(
        "document.addEventListener('securitypolicyviolation', "
        "e => console.error('csp violation: ' + e.violatedDirective))"
    )
    for route, ready in (
        ("/", "table.runs tr[data-run]"),
        (f"/page/run/{run_path(RUN_A)}", "table.epochs"),
        (f"/page/compare?a={run_path(RUN_A)}&b={run_path(RUN_B)}", "table.compare"),
    ):
        response = page.goto(loaded + route)
        assert response is not None
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        page.wait_for_selector(ready)
    csp = [text for text in violations if "csp violation" in text or "Content Security" in text]
    assert csp == []
