"""Screenshots of the three pages of a running runs page (`make page`) for docs/runs-page.md.

Usage: .venv/bin/python scripts/page_screenshots.py [URL] (default http://127.0.0.1:8080);
writes docs/page-runs.png, docs/page-run.png and docs/page-compare.png with the system's
Chromium (Debian's `chromium`). Where Pillow is importable (it is not a dependency), each
picture is reduced to 64 colours, a third of its size.
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

DOCS = Path(__file__).resolve().parents[1] / "docs"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
A = "page-a/arith/demo%2Foffline-a"
B = "page-b/arith/demo%2Foffline-b"
PAGES = {  # name: path, what shows it is loaded, width and height of the picture
    "page-runs": ("/", "tr[data-run] td.ci:not(:has(.pending))", 1400, 240),
    "page-run": (f"/page/run/{A}", "table.epochs", 1400, 900),
    "page-compare": (f"/page/compare?a={A}&b={B}", "table.compare", 1100, 760),
}


def _reduce(target: Path) -> None:
    """Fewer colours, when Pillow is there: the page is flat colours and text."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(target) as picture:
        reduced = picture.convert("RGB").quantize(64, dither=Image.Dither.NONE)
    reduced.save(target, optimize=True)


def main() -> None:
    base = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8080"
    DOCS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        for name, (path, ready, width, height) in PAGES.items():
            page.goto(base + path)
            page.wait_for_selector(ready)
            page.evaluate("document.getElementById('status').textContent = ''")
            target = DOCS / f"{name}.png"
            page.screenshot(path=target, clip={"x": 0, "y": 0, "width": width, "height": height})
            _reduce(target)
            print(f"{target}: {target.stat().st_size // 1024} KiB")
        browser.close()


if __name__ == "__main__":
    main()
