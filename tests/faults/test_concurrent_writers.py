"""Two workers on one run key, as processes: degraded writes never shadow successes (design rule 3).

Worker A asks a model that answers a quarter of the pairs with 429 or 500; it is paused
(SIGSTOP) past its lease, so worker B, asking a healthy model, takes the run key over; A is
woken while B is still writing. A writer whose lease expired starts no more pairs: A either
finished before it noticed, or stops with one line saying so (exit 1), its pairs in flight
landing around B's successes. Whatever the interleaving, the log must end with every pair
completed, and a further resume must ask the model nothing.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from resultlog.schemas import RunKey
from tests.support.audit import all_pairs, audit, report
from tests.support.cli import child_env
from tests.support.kafka import topic_settings
from tests.support.processes import durable, model_server, requests_in, start
from tests.support.scripted import partition_log
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

MODEL = "offline/gpt-4o"
SAMPLES, EPOCHS = 40, 2
LEASE_TTL_S = 2.0


def run_args(base_url: str, concurrency: int, *options: str) -> list[str]:
    return [
        *["run", "arith", "--model", MODEL, "--run-id", "shared", "--json"],
        *["--limit", str(SAMPLES), "--epochs", str(EPOCHS), "--concurrency", str(concurrency)],
        *["--base-url", base_url, *options],
    ]


@pytest.mark.parametrize("trial", range(3))
def test_a_paused_workers_degraded_writes_never_shadow_another_workers_successes(
    kafka_bootstrap: str, tmp_path: Path, trial: int
) -> None:
    began = time.monotonic()
    settings = topic_settings(kafka_bootstrap)
    env = child_env(settings, RESULTLOG_LEASE_TTL_S=str(LEASE_TTL_S))
    run_key = RunKey("shared", "arith", MODEL)
    flaky_options = ["--error-rate", "0.25", "--seed", str(trial), "--latency-ms", "20"]
    with (
        model_server(tmp_path / "flaky", env, *flaky_options) as (flaky_url, flaky_log),
        model_server(tmp_path / "healthy", env, "--error-rate", "0", "--latency-ms", "100") as (
            healthy_url,
            healthy_log,
        ),
    ):
        a = start(run_args(flaky_url, 2), env)
        wait_for(lambda: len(durable(settings, run_key)) >= 10, "A's first records")
        a.send_signal(signal.SIGSTOP)
        time.sleep(LEASE_TTL_S + 0.5)  # A's lease expires: B may take the run key over
        # Another endpoint is another configuration (design rule 10): B takes A's records as
        # they are.
        b = start(run_args(healthy_url, 1, "--accept-config-change"), env)
        wait_for(lambda: _written_by(settings, run_key, b.pid) >= 5, "B's first records")
        a.send_signal(signal.SIGCONT)
        _, a_err = a.communicate(timeout=120)
        _, b_err = b.communicate(timeout=120)
        assert a.returncode == 0 or "expired before this process renewed it" in a_err, a_err
        assert b.returncode == 0, b_err

        latest = {(r.sample_index, r.epoch): r for r in durable(settings, run_key)}
        shadowed = sorted(pair for pair, record in latest.items() if record.degraded)
        assert not shadowed, f"degraded records shadow completed pairs: {shadowed}"
        checked = audit(settings, run_key, all_pairs(SAMPLES, EPOCHS))
        assert checked.lost == checked.extra == 0

        before = len(requests_in(healthy_log))
        resumed = start(run_args(healthy_url, 4, "--accept-config-change"), env)
        out, err = resumed.communicate(timeout=120)
        assert resumed.returncode == 0, err
        assert len(requests_in(healthy_log)) == before, "the resume asked the model again"
        summary = json.loads(out)
        assert (summary["records"], summary["degraded_records"]) == (SAMPLES * EPOCHS, 0)

    log = partition_log(settings, run_key)
    a_degraded = sum(
        r.degraded and r.worker is not None and r.worker.pid == a.pid for _, r, _ in log
    )
    copies = Counter((key, value) for key, _, value in log)
    asked_by_a = {pair for pair in requests_in(flaky_log)}
    report(
        "concurrent writers",
        trial=trial,
        pairs=SAMPLES * EPOCHS,
        lost=checked.lost,
        shadowed=len(shadowed),
        degraded_written_by_a=a_degraded,
        restored=sum(n - 1 for n in copies.values()),
        asked_by_a=len(asked_by_a),
        asked_on_resume=0,
        seconds=round(time.monotonic() - began, 1),
    )


def _written_by(settings: object, run_key: RunKey, pid: int) -> int:
    records = durable(settings, run_key)  # type: ignore[arg-type]
    return sum(r.worker is not None and r.worker.pid == pid for r in records)
