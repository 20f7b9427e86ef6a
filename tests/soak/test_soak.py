"""`make soak` itself, short: a planted soak must report its plants; a clean one ends with
the closing line (three brokers, three aggregators, workers: minutes, so the slow tier)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
CLOSING = re.compile(r"soak: (\d+) faults, (\d+) checks, (\d+) violations")


def _soak(tmp_path: Path, seconds: int, seed: int, **extra: str) -> tuple[int, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESULTLOG_", "SOAK_"))}
    env.update(SOAK_S=str(seconds), SOAK_SEED=str(seed), SOAK_FIGURES=str(tmp_path / "soak.md"))
    env.update(extra)
    done = subprocess.run(
        [sys.executable, "-m", "tests.soak"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
        check=False,
    )
    return done.returncode, done.stdout.strip().splitlines()


def test_a_planted_soak_reports_both_plants_and_exits_1(tmp_path: Path) -> None:
    code, lines = _soak(tmp_path, 30, seed=11, SOAK_PLANT="1")
    closing = CLOSING.fullmatch(lines[-1])
    assert closing is not None, lines[-20:]
    assert code == 1 and int(closing[3]) >= 2, lines[-20:]
    text = "\n".join(lines)
    assert "served != replay" in text and "correct_answers" in text
    assert "pair asked twice" in text
    assert "soak: seed 11" in lines and "fault history:" in lines
    assert (tmp_path / "soak.md").exists()


def test_a_short_soak_ends_with_its_closing_line(tmp_path: Path) -> None:
    code, lines = _soak(tmp_path, 30, seed=5)
    closing = CLOSING.fullmatch(lines[-1])
    assert closing is not None, lines[-20:]
    faults, checks, violations = (int(group) for group in closing.groups())
    assert faults >= 1 and checks >= 1, lines[-20:]
    assert code == (1 if violations else 0), lines[-20:]
    assert lines[0].startswith("soak: seed 5 ") and "soak: seed 5" in lines
    figures = (tmp_path / "soak.md").read_text()
    assert "| seed | 5 |" in figures and f"| violations | {violations} (" in figures
