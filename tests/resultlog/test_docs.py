"""The documentation: generated pages cover the code, figures come from their generators,
the README is the front door, and nothing points outside the repository."""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from benchmarks._results import Goal, Result, report, write_markdown
from resultlog.cli import build_parser
from resultlog.settings import Settings
from tests.support.fault_table import FaultRow, fault_table, what_it_checks

REPO = Path(__file__).resolve().parents[2]


def _hooks() -> ModuleType:
    """scripts/docs_hooks.py, the MkDocs hooks (a script, not a package module)."""
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "scripts/docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    names = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{prefix} {name}".strip()
                names += [full, *_subcommands(sub, full)]
    return names


def test_cli_reference_names_every_command_and_option() -> None:
    page = _hooks().cli_reference()
    parser = build_parser()
    commands = _subcommands(parser)
    assert {"kafka up", "run", "status", "replay", "inspect resume", "worker"} <= set(commands)
    for command in commands:
        assert f"## `resultlog {command}` {{ #{command.replace(' ', '-')} }}" in page
    options = {
        option
        for sub in [parser, *_parsers(parser)]
        for action in sub._actions
        for option in action.option_strings
        if option not in ("-h", "--help")
    }
    assert "--budget-usd" in options
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    for option in options:
        assert any(re.match(rf"\| `(?:[^`]*, )?{re.escape(option)}\b", row) for row in rows)


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += [sub, *_parsers(sub)]
    return found


def test_settings_reference_documents_every_field() -> None:
    hooks = _hooks()
    page = hooks.settings_reference()
    meanings = hooks.attribute_docstrings(Settings)
    for name in Settings.model_fields:
        assert meanings.get(name), f"Settings.{name} has no docstring"
        assert f"`RESULTLOG_{name.upper()}`" in page
    assert "`OPENROUTER_API_KEY`" in page
    row = next(line for line in page.splitlines() if "`RESULTLOG_PARTITIONS`" in line)
    assert "| integer | `6` |" in row
    row = next(line for line in page.splitlines() if "`RESULTLOG_SASL_PASSWORD`" in line)
    assert "secret text, optional" in row


def test_markers_are_filled_and_an_unknown_one_fails() -> None:
    hooks = _hooks()
    page = hooks.render_markers("# CLI\n\n<!-- generated: cli -->\n", "cli.md")
    assert "## `resultlog run` { #run }" in page
    assert "<!-- generated" not in page
    with pytest.raises(ValueError, match=r"page\.md: unknown marker"):
        hooks.render_markers("<!-- generated: nothing -->", "page.md")


def test_bench_writes_the_performance_table_from_a_results_file(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    goal = Goal(">=", 2.0, on="ratio")
    report(Result("replay_all, 100k", 30_000.0, "rec/s", 10_000.0, "raw read", goal), results)
    report(Result("memory per record", 160.0, "B/rec", goal=Goal("<", 200.0)), results)
    with results.open("a", encoding="utf-8") as out:
        out.write(json.dumps({"what": "scale", "failed": "exit 1"}) + "\n")
    table = tmp_path / "docs" / "bench.md"
    write_markdown(results, table, "Written by make bench on a test machine.")
    lines = table.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("<!-- Written by scripts/bench.sh")
    assert "Written by make bench on a test machine." in lines
    rows = [line for line in lines if line.startswith("| ")]
    assert len(rows) == 5  # head, rule, three figures
    cells = [cell.strip() for cell in rows[2].strip("|").split("|")]
    assert cells == [
        "replay_all, 100k (vs raw read)",
        "30.0k rec/s",
        "-",
        "10.0k rec/s",
        "3.00x",
        "ratio >= 2x",
        "yes",
    ]
    assert rows[3].split("|")[-2].strip() == "yes"
    assert "failed" in rows[4] and "exit 1" in rows[4]


def test_the_fault_table_lists_each_test_with_its_outcome() -> None:
    def sample() -> None:
        """Kills the broker at 20%; the re-run completes.

        More detail that the table leaves out.
        """

    rows = [
        FaultRow("tests/faults/test_b.py::test_two[3]", "two | three", "failed", 2.25),
        FaultRow("tests/faults/test_a.py::test_one", what_it_checks(sample), "passed", 14.0),
        FaultRow("tests/faults/test_a.py::test_skip", "skips", "skipped", 0.0),
    ]
    text = fault_table(rows, "Written by make test-faults on a test machine.")
    lines = text.splitlines()
    assert "Outcome: 1 passed, 1 failed, 1 skipped." in lines[2]
    body = [line for line in lines if line.startswith("| `")]
    assert body == [
        "| `test_a.py::test_one` | Kills the broker at 20%; the re-run completes. "
        "| passed | 14.0 s |",
        "| `test_a.py::test_skip` | skips | skipped | 0.0 s |",
        "| `test_b.py::test_two[3]` | two \\| three | failed | 2.2 s |",
    ]


def test_readme_is_a_short_front_door_that_links_every_page() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode("utf-8")) < 12 * 1024
    linked = set(re.findall(r"\]\(docs/([^)#]+)\)", readme))
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    pages = set(re.findall(r"^ +- [^:\n]+: ([\w/.-]+\.md)$", config, flags=re.MULTILINE))
    assert len(pages) >= 15
    assert pages <= linked
    for page in linked:
        assert (REPO / "docs" / page).is_file(), page


# Built from parts, so this file does not name what it looks for.
_OUTSIDE = re.compile(
    "|".join(
        [
            r"\bDESIG" + r"N\b",
            r"\bthe " + r"card\b",
            r"\b[Ii]ssue" + r" [0-9]+",
            r"\b[Ii]tems?" + r" [0-9]+",
            # another project's issue or pull request: a name, '#' and its number (not a colour)
            r"[A-Za-z_-]" + r"#[0-9]{3,}(?![0-9a-fA-F])",
        ]
    )
)


def test_nothing_points_outside_the_repository() -> None:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    offending = []
    for name in files:
        path = REPO / name
        # docs/_incoming/ holds other engineers' notes until they are folded into the pages
        # (the site leaves that folder out); everything else must stand on its own.
        if not path.is_file() or path.suffix == ".png" or name.startswith("docs/_incoming/"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if _OUTSIDE.search(line):
                offending.append(f"{name}:{number}: {line.strip()}")
    assert offending == []


def test_the_design_page_names_every_topic_the_settings_define() -> None:
    design = _hooks().render_markers((REPO / "docs/design.md").read_text(encoding="utf-8"), "")
    fields = [name for name in Settings.model_fields if name.endswith("_topic")]
    defaults = [Settings.model_fields[name].default for name in fields]
    assert sorted(Settings().every_topic()) == sorted(defaults)
    assert [topic for topic in defaults if f"| `{topic}` |" not in design] == []


# Java and the broker's jars come with the package (the `local` extra, Maven Central through
# httpx): no page may send a user to install either by hand.
_BY_HAND = re.compile(r"(apt-get|apt|brew|dnf|yum) install[^\n`]*\b(openjdk\S*|maven|java)\b")


def test_no_page_tells_users_to_install_java_or_maven_by_hand() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    told = [
        f"{page.relative_to(REPO)}: {found.group(0)}"
        for page in pages
        for found in _BY_HAND.finditer(page.read_text(encoding="utf-8"))
    ]
    assert told == []


# A figure with its unit: "0.95 s", "19.6 B", "1.14x", "67.2k rec/s".
_FIGURE = re.compile(r"(?<![\w.])\d[\d.,]*\s?(?:ms|s|MB|GB|kB|B|x|k? ?rec/s|pairs/s)(?!\w)")


def test_the_readme_quotes_no_figure_the_generated_table_does_not_hold() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = (REPO / "docs/_generated/bench.md").read_text(encoding="utf-8")
    assert [figure for figure in _FIGURE.findall(readme) if figure not in table] == []
