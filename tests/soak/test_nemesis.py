"""The nemesis's store corruption: it breaks a partition's store, and only that."""

from __future__ import annotations

import random
from pathlib import Path

from tests.soak.nemesis import corrupt_store


def _store(root: Path, name: str, tables: int) -> Path:
    store = root / "resultlog.sample-results" / name
    store.mkdir(parents=True)
    (store / "CURRENT").write_text("MANIFEST-000005\n")
    for number in range(tables):
        (store / f"{number:06d}.sst").write_bytes(b"table")
    return store


def test_a_store_gets_garbage_in_current_or_loses_an_sst(tmp_path: Path) -> None:
    store = _store(tmp_path, "0", tables=2)
    said = {corrupt_store(random.Random(seed), tmp_path) for seed in range(8)}
    assert any(s.startswith("garbage in resultlog.sample-results/0/CURRENT") for s in said)
    assert any(s.startswith("deleted resultlog.sample-results/0/0000") for s in said)
    assert not (store / "CURRENT").read_text().endswith("\n")


def test_nothing_to_corrupt_is_said_and_set_aside_stores_are_left_alone(tmp_path: Path) -> None:
    assert corrupt_store(random.Random(1), tmp_path) == "no store to corrupt yet"
    aside = _store(tmp_path, "0.corrupt-1", tables=0)
    assert corrupt_store(random.Random(1), tmp_path) == "no store to corrupt yet"
    assert (aside / "CURRENT").read_text() == "MANIFEST-000005\n"
