"""A Ctrl-C of `inspect eval` says the one command that continues it."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from resultlog.producer.offline import ModelServer
from resultlog.settings import Settings
from tests.producer.inspect_plugin.support import (
    REPO,
    TIMEOUT_S,
    durable_count,
    eval_command,
    inspect_env,
)
from tests.support.waiting import wait_for


@pytest.mark.slow  # an inspect eval child and its SIGINT
def test_a_ctrl_c_of_an_eval_names_resultlog_inspect_resume(
    settings: Settings, cli_env: dict[str, str], tmp_path: Path
) -> None:
    with ModelServer(latency_s=0.3) as server:
        eval_ = subprocess.Popen(
            eval_command("ctrl-c", tmp_path / "logs", "--max-samples", "2"),
            cwd=REPO,
            env=inspect_env(cli_env, server),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(lambda: durable_count(settings, "ctrl-c") >= 2, "2 durable pairs", TIMEOUT_S)
            eval_.send_signal(signal.SIGINT)
            out, err = eval_.communicate(timeout=TIMEOUT_S)
        finally:
            if eval_.poll() is None:
                eval_.kill()
                eval_.communicate()
    said = "resultlog: interrupted: every finished sample is durable; continue with "
    assert f"{said}`resultlog inspect resume --run-id ctrl-c`" in out + err, out + err
