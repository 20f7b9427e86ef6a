"""The suite's own ledger: no listed test is lost, and CI allows only the listed skips."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.idlist import (
    COLLECTED,
    MIN_TESTS,
    AllowedSkip,
    all_test_ids,
    allowed_skips,
    listed_ids,
    lost_ids,
    merged_ids,
    unexplained_skips,
)

LISTED = ["t.py::a", "t.py::b", "t.py::c[1]", "t.py::c[2]"]


def test_a_listed_test_that_is_collected_is_not_lost() -> None:
    """Every listed ID collected (and new ones beside them): nothing is lost."""
    assert lost_ids([*LISTED, "t.py::new"], LISTED, {}) == []


def test_a_listed_test_that_is_gone_is_lost() -> None:
    """A listed ID neither collected nor mapped is lost, and said so."""
    assert lost_ids(LISTED[1:], LISTED, {}) == ["t.py::a (gone, and not in merged_tests.txt)"]


def test_a_merged_test_counts_only_while_its_target_is_collected() -> None:
    """A merged ID is kept by its target; a target that is gone loses it too."""
    merged = {"t.py::c[2]": "t.py::c[1]"}
    assert lost_ids(LISTED[:3], LISTED, merged) == []
    assert lost_ids(LISTED[:2], LISTED, merged) == [
        "t.py::c[1] (gone, and not in merged_tests.txt)",
        "t.py::c[2] (merged into t.py::c[1], which is not collected)",
    ]


def test_the_ledger_files_parse_and_hold_every_test_of_before(tmp_path: Path) -> None:
    """test_ids.txt lists at least MIN_TESTS distinct IDs; the mapping parses, and a line
    without its arrow is refused naming itself."""
    ids = listed_ids()
    assert len(ids) == len(set(ids)) >= MIN_TESTS
    assert set(merged_ids()) <= set(ids)
    broken = tmp_path / "merged.txt"
    broken.write_text("t.py::a t.py::b\n")
    with pytest.raises(ValueError, match=re.escape("not `old ID -> new ID`: 't.py::a t.py::b'")):
        merged_ids(broken)


def test_a_skip_is_allowed_only_by_an_entry_matching_its_id_and_reason() -> None:
    """An entry allows IDs matching its pattern skipped for a reason starting with its own."""
    allowed = [AllowedSkip("t.py::*", "needs root")]
    skipped = {
        "t.py::a": "needs root to mknod",
        "t.py::b": "no browser",
        "u.py::a": "needs root to mknod",
    }
    assert unexplained_skips(skipped, allowed) == [
        "t.py::b: no browser",
        "u.py::a: needs root to mknod",
    ]


def test_the_skip_list_parses_and_refuses_an_entry_without_a_reason(tmp_path: Path) -> None:
    """Every entry of skips.txt has a pattern and a reason; one without is refused."""
    assert all(entry.pattern and entry.reason for entry in allowed_skips())
    broken = tmp_path / "skips.txt"
    broken.write_text("t.py::*\n")
    with pytest.raises(ValueError, match="not `ID pattern \\| reason`"):
        allowed_skips(broken)


def test_no_test_of_the_ledger_is_lost(request: pytest.FixtureRequest) -> None:
    """Every test of test_ids.txt is collected or merged into a collected one, and all tiers
    hold at least MIN_TESTS (this run's collection when it was whole, else a fresh one)."""
    collected = request.config.stash.get(COLLECTED, None) or all_test_ids()
    assert lost_ids(collected, listed_ids(), merged_ids()) == []
    assert len(collected) >= MIN_TESTS
