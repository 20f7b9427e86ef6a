"""`resultlog` as a child process: its environment, its argv, one call and its JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from resultlog.settings import Settings

TIMEOUT_S = 120.0


def child_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment of a `resultlog` child process using these settings (secrets too)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESULTLOG_")}
    for name, value in settings.model_dump(exclude_none=True).items():
        text = value.get_secret_value() if isinstance(value, SecretStr) else str(value)
        env[f"RESULTLOG_{name.upper()}"] = text
    # Degraded pairs retry quickly: the model client's backoff is not under test here.
    env["RESULTLOG_MODEL_RETRY_BACKOFF_S"] = "0.01"
    return {**env, **extra}


def cli_argv(*args: str) -> list[str]:
    """The argv of a `resultlog` child process (this interpreter's installation)."""
    return [sys.executable, "-m", "resultlog.cli", *args]


def run_cli(
    env: dict[str, str], *args: str, cwd: Path | None = None, timeout_s: float = TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run `resultlog ARGS` to its end in `env`, capturing its output as text."""
    return subprocess.run(
        cli_argv(*args), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout_s
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a failed `resultlog` printed, `resultlog: error: ...`."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0, done.stdout
    assert len(lines) == 1 and lines[0].startswith("resultlog: error:"), done.stderr
    return lines[0]


def printed_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON object a successful `resultlog ... --json` printed last."""
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert isinstance(found, dict), found
    return found
