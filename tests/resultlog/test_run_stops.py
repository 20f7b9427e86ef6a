"""`resultlog run` stopped by a signal: what it finished, degraded outcomes too, is durable."""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from resultlog.producer.offline import is_expected_degraded
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.processes import durable, model_server, requests_in, start
from tests.support.waiting import wait_for

MODEL = "offline/gpt-4o"
ERROR_RATE = 0.3
ATTEMPTS = 4  # the model client's first attempt and its 3 retries (settings' default)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["INT", "TERM"])
def test_a_stopped_run_persists_its_finished_degraded_outcomes(
    tmp_path: Path, settings: Settings, cli_env: dict[str, str], signum: signal.Signals
) -> None:
    run_key = RunKey(f"stop-{signum.name}", "arith", MODEL)
    options = ("--latency-ms", "100", "--error-rate", str(ERROR_RATE))
    with model_server(tmp_path / "server", cli_env, *options) as (url, log):
        args = ["run", "arith", "--model", MODEL, "--run-id", run_key.run_id, "--json"]
        # Far more pairs than the test waits for, so a slow machine still signals a live run.
        worker = start([*args, "--limit", "1000", "--concurrency", "4", "--base-url", url], cli_env)

        def given_up() -> set[tuple[str, int]]:
            """The degraded pairs whose every attempt was asked."""
            asked = Counter(requests_in(log))
            return {
                pair
                for pair, count in asked.items()
                if count >= ATTEMPTS and is_expected_degraded(*pair, error_rate=ERROR_RATE)
            }

        finished = wait_for(lambda: given_up() if len(given_up()) >= 3 else None, "3 degraded")
        time.sleep(0.5)  # their last answers (100 ms late) have reached the run by now
        assert worker.poll() is None, "the run ended before the signal"
        worker.send_signal(signum)
        _, err = worker.communicate(timeout=60)
        asked = Counter(requests_in(log))

    assert worker.returncode == 128 + signum, err
    assert len(err.strip().splitlines()) == 1, err
    # The line says what is saved and how to go on.
    assert "the pairs finished before it are durable" in err, err
    assert err.strip().endswith("run the same command to resume"), err
    records = {(r.sample_id, r.epoch): r for r in durable(settings, run_key)}
    degraded = {pair: r for pair, r in records.items() if r.degraded}
    assert finished <= degraded.keys(), "a finished degraded outcome was dropped"
    for pair, record in degraded.items():
        assert record.attempts == asked[pair] and record.spent_cost is not None, record
