"""The TypeScript client, installed and built once per session for the interop tests."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"


def _npm(*args: str) -> None:
    done = subprocess.run(
        ["npm", *args], cwd=CLIENT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"npm {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"


@pytest.fixture(scope="session")
def ts_client() -> Path:
    """clients/typescript with its packages installed (npm ci) and built (tsc)."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        reason = f"the TypeScript client's tests need {' and '.join(missing)} on PATH"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI must install Node.js 20.19+)")
        pytest.skip(reason)
    # Under pytest-xdist every worker asks: one builds while the others wait, and a worker
    # finding this run's stamp uses the build as it is.
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    stamp = CLIENT / "dist" / ".built-by-test-run"
    with (Path(tempfile.gettempdir()) / "resultlog-ts-client.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if run and stamp.is_file() and stamp.read_text() == run:
            return CLIENT
        if not (CLIENT / "node_modules").is_dir():
            _npm("ci", "--no-audit", "--no-fund")
        _npm("run", "build")
        if run:
            stamp.write_text(run)
    return CLIENT
