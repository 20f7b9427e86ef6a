"""The docs as tests: the shell blocks of the README and the pages, run in the order a newcomer
follows them, in a fresh HOME with `resultlog up` running, failing on the first block that
exits non-zero. A block that cannot run there says so in the page, in a comment the runner reads:
`<!-- walkthrough: skip (WHY) -->` on the line before it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from resultlog.broker import jar_cache_dir
from tests.support.cli import cli_argv
from tests.support.stack import running_up

REPO = Path(__file__).resolve().parents[2]
PAGES = (
    "README.md",
    "docs/getting-started.md",
    "docs/local-stack.md",
    "docs/inspect.md",
    "docs/analysis.md",
    "docs/rescore.md",
    "docs/lm-eval.md",
    "docs/typescript.md",
)
_BLOCK = re.compile(
    r"(?:^ *<!-- walkthrough: skip \((?P<why>.+?)\) -->\n)?^(?P<indent> *)```(?:sh|bash)\n"
    r"(?P<body>.*?)^ *```",
    re.MULTILINE | re.DOTALL,
)
_MARKER = re.compile(r"<!-- walkthrough:.*?-->")
BLOCK_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Block:
    """One shell block of a page: where it is, its text, and why it is skipped (if it is)."""

    page: str
    number: int
    body: str
    skip: str | None

    def __str__(self) -> str:
        return f"{self.page} block {self.number}"


def blocks(page: str) -> list[Block]:
    """The page's shell blocks, in order."""
    text = (REPO / page).read_text(encoding="utf-8")
    return [
        Block(page, n, textwrap.dedent(found["body"]), found["why"])
        for n, found in enumerate(_BLOCK.finditer(text))
    ]


def test_every_skip_marker_names_why_and_stands_before_a_shell_block() -> None:
    for page in PAGES:
        text = (REPO / page).read_text(encoding="utf-8")
        markers = _MARKER.findall(text)
        skipped = [block for block in blocks(page) if block.skip is not None]
        assert len(markers) == len(skipped), f"{page}: a marker not right before a shell block"
        assert all(len(block.skip or "") > 10 for block in skipped), page


def _run_ids(page: str) -> set[str]:
    runnable = "\n".join(block.body for block in blocks(page) if block.skip is None)
    return set(re.findall(r"(?:--run-id |resultlog_run=)([\w.-]+)", runnable))


def test_pages_that_follow_each_other_use_their_own_run_ids() -> None:
    # A page that continues an earlier page's run says so ("on purpose").
    seen: dict[str, str] = {}
    for page in PAGES:
        on_purpose = "on purpose" in (REPO / page).read_text(encoding="utf-8")
        for run_id in _run_ids(page):
            earlier = seen.setdefault(run_id, page)
            assert earlier == page or on_purpose, f"{page} reuses {run_id} of {earlier}"


def test_no_runnable_block_pastes_a_fixed_local_broker_address() -> None:
    for page in PAGES:
        for block in blocks(page):
            if block.skip is None:
                assert "RESULTLOG_BOOTSTRAP_SERVERS=127.0.0.1" not in block.body, block


def _checkout_view(root: Path) -> Path:
    """A directory that looks like the checkout (a link to each of its top-level entries), so
    that files the pages write land here, not in the repository."""
    root.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in (".git", "site", "out"):
            (root / entry.name).symlink_to(entry)
    return root


def _fresh_env(home: Path) -> dict[str, str]:
    """A newcomer's environment: an empty HOME, no RESULTLOG_* (but the jar cache) or XDG_*
    setting; Hugging Face offline (no hub is reachable; the lm-eval page's data is a file)."""
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RESULTLOG_", "XDG_", "INSPECT_", "HF_")) and k != "HOME"
    }
    # The broker's jars as downloaded once already (a newcomer's first `up` downloads them).
    cache = str(jar_cache_dir().parents[1])
    offline = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return {**env, "HOME": str(home), "RESULTLOG_KAFKA_CACHE": cache, **offline}


def _run_block(block: Block, cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[str]:
    """Start the block in a shell of its own session (its background servers stay with it)."""
    with log.open("w") as out:
        return subprocess.Popen(
            ["bash", "-e", "-o", "pipefail", "-c", block.body],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )


def _stop_sessions(sessions: list[int]) -> None:
    """End what a page's blocks left running (its model servers), as closing its terminal."""
    for session in sessions:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(session, signal.SIGTERM)


def _follow(page: str, cwd: Path, env: dict[str, str], logs: Path) -> None:
    """Run the page's blocks in order, each from the checkout; fail on the first that fails."""
    sessions: list[int] = []
    try:
        for block in blocks(page):
            if block.skip is not None:
                continue
            log = logs / f"{page.replace('/', '_')}-{block.number}.log"
            shell = _run_block(block, cwd, env, log)
            sessions.append(shell.pid)
            code = shell.wait(timeout=BLOCK_TIMEOUT_S)
            output = log.read_text(errors="replace")[-6000:]
            assert code == 0, f"{block} exited {code}:\n{block.body}\n--- its output ---\n{output}"
    finally:
        _stop_sessions(sessions)


@pytest.mark.slow
@pytest.mark.timeout(5400)
def test_a_newcomer_follows_every_page_in_turn(tmp_path: Path) -> None:
    cwd = _checkout_view(tmp_path / "checkout")
    env = _fresh_env(tmp_path / "home")
    logs = tmp_path / "logs"
    logs.mkdir()
    argv = cli_argv("up", "--http", "127.0.0.1:0", "--port", "0")
    with running_up(argv, env) as stack:
        stack.announced()
        for page in PAGES:
            _follow(page, cwd, env, logs)
        code, stderr = stack.stop(signal.SIGTERM)
    assert code == 0, stderr


def test_the_lm_eval_example_needs_no_checkout_and_writes_under_tmp(tmp_path: Path) -> None:
    page = "\n".join(block.body for block in blocks("docs/lm-eval.md"))
    assert "tests." not in page and "--output_path out" not in page
    assert "--output_path /tmp/" in page
    # Its task writer, run from a directory that is no checkout.
    done = subprocess.run(
        [sys.executable, "-m", "resultlog.lm_eval", str(tmp_path / "tasks")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    written = sorted(path.name for path in (tmp_path / "tasks").iterdir())
    assert written == [
        "arith.jsonl",
        "arith_mc.jsonl",
        "resultlog_arith.yaml",
        "resultlog_arith_mc.yaml",
    ]


def test_the_page_screenshot_note_gives_chromium_virtual_time() -> None:
    page = (REPO / "docs" / "runs-page.md").read_text(encoding="utf-8")
    assert "chromium --headless --screenshot" in page and "--virtual-time-budget=" in page
