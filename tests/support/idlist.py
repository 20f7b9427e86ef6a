"""The suite's ledger of test IDs and of the skips CI allows, as the root conftest checks them.

tests/test_ids.txt holds every test ID the suite collected before its tiers were re-cut (all
tiers, `pytest --collect-only -q -m ""`); tests/merged_tests.txt maps an ID that was merged into
another test to that test. A listed ID lost without a mapping fails the run. tests/skips.txt
lists the skips CI allows (an ID pattern and the reason's beginning).
"""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = [
    "COLLECTED",
    "LISTED",
    "MERGED",
    "MIN_TESTS",
    "SKIPS",
    "AllowedSkip",
    "all_test_ids",
    "allowed_skips",
    "listed_ids",
    "lost_ids",
    "merged_ids",
    "unexplained_skips",
]

TESTS = Path(__file__).resolve().parents[1]
LISTED = TESTS / "test_ids.txt"
MERGED = TESTS / "merged_tests.txt"
SKIPS = TESTS / "skips.txt"
MIN_TESTS = 1346
"""All tiers together collect at least this many tests (the count of tests/test_ids.txt)."""
COLLECTED = pytest.StashKey[list[str]]()
"""Every test ID a run collected before deselection, when it collected every test file."""


def all_test_ids() -> list[str]:
    """Every test ID of every tier, from a fresh `pytest --collect-only -m ""`."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-m",
            "",
            "-p",
            "no:cacheprovider",
        ],
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def _lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [s for line in text.splitlines() if (s := line.strip()) and not s.startswith("#")]


def listed_ids(path: Path = LISTED) -> list[str]:
    """The IDs of the ledger, one a line (`#` comments and blank lines ignored)."""
    return _lines(path)


def merged_ids(path: Path = MERGED) -> dict[str, str]:
    """`old ID -> the ID of the test it was merged into`, one pair a line."""
    pairs = [line.split(" -> ") for line in _lines(path)]
    bad = [" -> ".join(pair) for pair in pairs if len(pair) != 2]
    if bad:
        raise ValueError(f"{path.name}: not `old ID -> new ID`: {bad[0]!r}")
    return {old.strip(): new.strip() for old, new in pairs}


def lost_ids(
    collected: Iterable[str], listed: Iterable[str], merged: Mapping[str, str]
) -> list[str]:
    """Listed IDs that are not collected and are not merged into a collected test, each with
    what happened to it."""
    present = set(collected)
    lost = []
    for test_id in listed:
        if test_id in present:
            continue
        into = merged.get(test_id)
        if into is None:
            lost.append(f"{test_id} (gone, and not in {MERGED.name})")
        elif into not in present:
            lost.append(f"{test_id} (merged into {into}, which is not collected)")
    return lost


@dataclass(frozen=True)
class AllowedSkip:
    """A skip CI allows: tests whose ID matches `pattern` (fnmatch), for a reason that starts
    with `reason`."""

    pattern: str
    reason: str

    def allows(self, test_id: str, reason: str) -> bool:
        """Whether this entry allows `test_id` to skip for `reason`."""
        return fnmatch.fnmatchcase(test_id, self.pattern) and reason.startswith(self.reason)


def allowed_skips(path: Path = SKIPS) -> list[AllowedSkip]:
    """The entries of the skip list: `ID pattern | reason's beginning`, one a line."""
    entries = []
    for line in _lines(path):
        pattern, sep, reason = line.partition(" | ")
        if not sep or not reason.strip():
            raise ValueError(f"{path.name}: not `ID pattern | reason`: {line!r}")
        entries.append(AllowedSkip(pattern.strip(), reason.strip()))
    return entries


def unexplained_skips(skipped: Mapping[str, str], allowed: Iterable[AllowedSkip]) -> list[str]:
    """The skipped tests (ID -> reason) no entry of the skip list allows, each with its reason."""
    entries = list(allowed)
    return [
        f"{test_id}: {reason}"
        for test_id, reason in sorted(skipped.items())
        if not any(entry.allows(test_id, reason) for entry in entries)
    ]
