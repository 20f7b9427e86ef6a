"""`resultlog inspect resume` and `import` errors: one line, non-zero."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import one_line_error, run_cli


def test_resuming_a_run_without_records_is_a_one_line_error(cli_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "resultlog.cli", "inspect", "resume", "--run-id", "nothing"],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("resultlog: error: run 'nothing' has no records in ")
    assert "nothing to resume (run the eval again)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_the_resume_line_says_whose_tokens_it_counts() -> None:
    from resultlog.cli._inspect import _line
    from resultlog.producer.inspect import ResumedTask
    from resultlog.schemas import RunKey

    task = ResumedTask(
        RunKey("r", "arith", "openai-api/offline/arith"),
        reused=4,
        expected=16,
        status="success",
        location="logs/x.eval",
        metrics={"match/accuracy": 0.75},
        tokens=208,
        session_tokens=156,
    )
    line = _line(task)
    assert "4 of 16 pairs reused" in line and "match/accuracy=0.75" in line
    assert "208 tokens in the run (156 in this session's model calls" in line


@pytest.mark.parametrize(
    ("what", "said"),
    [
        ("missing.eval", "missing.eval: no such file or directory"),
        ("empty", "holds no Inspect log"),
    ],
)
def test_importing_what_is_no_log_is_a_one_line_error(
    cli_env: dict[str, str], tmp_path: Path, what: str, said: str
) -> None:
    (tmp_path / "empty").mkdir()
    done = run_cli(cli_env, "inspect", "import", str(tmp_path / what))
    assert said in one_line_error(done)


def test_importing_a_file_that_is_no_log_is_a_one_line_error(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    junk = tmp_path / "notes.eval"
    junk.write_text("not a zip")
    done = run_cli(cli_env, "inspect", "import", str(junk))
    assert f"{junk}: not an Inspect log Inspect can read" in one_line_error(done)
