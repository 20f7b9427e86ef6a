"""The pages a new user follows in order agree with each other and with the code, and the docs
build `make lint` runs fails on a broken link or anchor."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
_SHELL = re.compile(r"^ *```(?:sh|bash)\n(.*?)^ *```", re.MULTILINE | re.DOTALL)


def _shell_blocks(page: Path) -> list[str]:
    return _SHELL.findall(page.read_text(encoding="utf-8"))


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def test_getting_started_asks_for_python_only_as_the_readme_does() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    page = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    needs = page.split("## What you need", 1)[1].split("\n## ", 1)[0]
    assert "**Python 3.11+.** That is all" in readme
    assert needs.strip().startswith("Python 3.11+. That is all")
    assert "Maven is never needed to run" in needs


def test_no_page_installs_resultlog_from_a_package_index() -> None:
    # resultlog is not on an index: `pip install 'resultlog[x]'` fails for a new user.
    from_index = re.compile(r"pip install '?resultlog\[")
    found = [
        f"{page.name}: {line.strip()}"
        for page in _pages()
        for line in page.read_text(encoding="utf-8").splitlines()
        # A page may quote an error message of the code as it is.
        if from_index.search(line) and "resultlog: error:" not in line
    ]
    assert found == []
    page = (DOCS / "getting-started.md").read_text(encoding="utf-8")
    assert "pip install '/path/to/resultlog[" in page and "pip wheel" in page


def _run_ids(text: str) -> set[str]:
    return set(re.findall(r"(?:--run-id |resultlog_run=)([\w.-]+)", text))


def test_the_readme_quick_start_and_the_inspect_page_use_their_own_run_ids() -> None:
    # `inspect resume --run-id X` resumes every run key of X: a run id that the quick start's
    # `resultlog run` also wrote makes the documented resume fail.
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    run_ids = _run_ids(quick_start) | _run_ids((DOCS / "getting-started.md").read_text())
    inspect_ids = _run_ids((DOCS / "inspect.md").read_text(encoding="utf-8"))
    assert run_ids and inspect_ids
    assert run_ids.isdisjoint(inspect_ids), run_ids & inspect_ids


def test_shell_blocks_call_the_checkouts_command_line() -> None:
    bare = re.compile(r"(?:^|[\s(]|\$\()resultlog (?!\[)")
    found = [
        f"{page.name}: {line.strip()}"
        for page in sorted(DOCS.glob("*.md"))
        for block in _shell_blocks(page)
        for line in block.splitlines()
        if not line.lstrip().startswith("#")
        # Inside a container (`docker compose exec SERVICE resultlog ...`) the image's own
        # console script is on PATH: no checkout there.
        and "docker " not in line
        and bare.search(line.split(" #", 1)[0].replace(".venv/bin/resultlog ", ""))
    ]
    assert found == []


def test_the_documented_inspect_eval_keeps_its_logs_out_of_the_checkout() -> None:
    page = DOCS / "inspect.md"
    [first, *_] = _shell_blocks(page)
    assert "inspect eval" in first
    [log_dir] = re.findall(r"^export INSPECT_LOG_DIR=(\S+)", first, flags=re.MULTILINE)
    assert Path(log_dir).is_absolute()
    assert not Path(log_dir).resolve().is_relative_to(REPO)


def test_the_documented_kill_and_resume_of_the_example_limits_its_concurrency() -> None:
    # Inspect asks all 16 pairs of the example at once: a kill finds them all in flight.
    for page in (DOCS / "inspect.md", DOCS / "local-stack.md"):
        evals = [
            block
            for block in _shell_blocks(page)
            if "inspect eval" in block and "--latency-ms 1000" in block
        ]
        assert evals, page.name
        assert all("--max-samples 2" in block for block in evals), page.name


def _lint_docs_command(config: Path) -> str:
    """The docs build line of `make lint`, as make would run it with MKDOCS_CONFIG=config."""
    dry_run = subprocess.run(
        ["make", "--no-print-directory", "-n", "lint", f"MKDOCS_CONFIG={config}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    [line] = [line for line in dry_run.splitlines() if "mkdocs build" in line]
    assert "--strict" in line and "--quiet" not in line and "-q " not in line
    return line


@pytest.mark.slow  # builds the whole docs site
def test_a_broken_anchor_or_link_fails_the_docs_build_of_make_lint(tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(DOCS, site / "docs")
    shutil.copy(REPO / "mkdocs.yml", site / "mkdocs.yml")
    (site / "scripts").mkdir()
    shutil.copy(REPO / "scripts" / "docs_hooks.py", site / "scripts" / "docs_hooks.py")
    page = site / "docs" / "workers.md"
    with page.open("a", encoding="utf-8") as out:
        out.write("\nSee [budgets](budgets.md#no-such-heading) and [a page](no-such-page.md).\n")
    built = subprocess.run(
        _lint_docs_command(site / "mkdocs.yml"),
        shell=True,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode != 0, built.stderr
    assert "#no-such-heading" in built.stderr, built.stderr
    assert "no-such-page.md" in built.stderr, built.stderr
    assert "Aborted with 2 warnings in strict mode" in built.stdout + built.stderr, built.stdout
