"""A headless Chromium for the runs page's tests: Debian's `chromium` driven by Playwright.

Playwright's own browser downloads are never used (`playwright install` is not needed): the
browser is the system's, and where it is missing the tests skip saying how to install it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHROMIUM = os.environ.get("RESULTLOG_TEST_CHROMIUM", "/usr/bin/chromium")
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "page"
INSTALL_HINT = (
    "the runs page's browser tests need Chromium at {path}: install Debian's package with "
    "`apt-get update && apt-get install -y chromium` (or point RESULTLOG_TEST_CHROMIUM at a "
    "Chromium binary)"
)


def chromium_or_skip() -> str:
    """The Chromium binary, or skip the test saying how to install it."""
    found = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which(CHROMIUM)
    if not found:
        pytest.skip(INSTALL_HINT.format(path=CHROMIUM))
    return found


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium, closed at the end."""
    executable = chromium_or_skip()
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="install the test extra: pip install -e '.[test]'"
    )
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=LAUNCH_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def tab(browser: Browser, timeout_ms: int = 30_000, **options: Any) -> Iterator[Page]:
    """A fresh tab in a context of its own (`options`: Playwright's context options), closed
    at the end."""
    context = browser.new_context(**options)
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    try:
        yield page
    finally:
        context.close()


def screenshot_path(name: str) -> Path:
    """Where a test writes the screenshot `name`.png (git-ignored)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / f"{name}.png"


def outside_the_browser_loop(function: Callable[..., object], *args: object) -> None:
    """Call `function` in a thread of its own and wait: Playwright's sync API keeps an event
    loop running in the test's thread, where code that calls `asyncio.run` cannot run."""
    failures: list[BaseException] = []

    def call() -> None:
        try:
            function(*args)
        except BaseException as exc:  # handed to the test's thread
            failures.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    if failures:
        raise failures[0]
