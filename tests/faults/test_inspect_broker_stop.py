"""A broker stopped mid-eval makes `inspect eval` end in error, loudly, naming resultlog.

Inspect swallows hook exceptions and exits 0 even for an errored task; the plugin's failed
publish must still end the task in error and the command non-zero, so a CI job notices that
the results log misses results that Inspect's own log has.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from inspect_ai.log import read_eval_log

from resultlog.broker import LocalKafka
from resultlog.producer.offline import ModelServer
from tests.producer.inspect_plugin.support import (
    ALL_PAIRS,
    REPO,
    TIMEOUT_S,
    durable_count,
    eval_command,
    fresh_settings,
    inspect_env,
)
from tests.support.cli import child_env
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults


def test_a_broker_stopped_mid_eval_fails_the_eval_and_the_command(
    kafka_dir: Path, tmp_path: Path
) -> None:
    kafka = LocalKafka(kafka_dir)
    # Each delivery waits 1.5 s: four attempts fail within seconds of the broker going away.
    settings = fresh_settings(kafka.up(port=0), delivery_timeout_ms=1500)
    log_dir = tmp_path / "logs"
    with ModelServer(latency_s=0.3) as server:
        running = subprocess.Popen(
            eval_command("stopped", log_dir, "--max-samples", "1"),
            cwd=REPO,
            env=inspect_env(child_env(settings), server),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            wait_for(lambda: durable_count(settings, "stopped") >= 2, "2 durable pairs", TIMEOUT_S)
            kafka.stop_node(1)
            output, _ = running.communicate(timeout=TIMEOUT_S)
        finally:
            running.kill()
        asked = len(server.requests)

    assert running.returncode != 0, output
    assert "resultlog: could not publish sample" in output
    assert "resultlog inspect resume --run-id stopped" in output
    assert asked < len(ALL_PAIRS)  # the task stopped: no more model calls
    [path] = log_dir.glob("*.eval")
    log = read_eval_log(str(path), header_only=True)
    assert log.status == "error"
    assert log.error is not None and "resultlog: could not publish" in log.error.message
