"""`resultlog inspect resume` errors: one line, non-zero."""

from __future__ import annotations

import subprocess
import sys


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
