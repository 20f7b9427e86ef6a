"""Leases between `resultlog run` processes (design rule 18): nobody pays twice for a pair."""

from __future__ import annotations

import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from resultlog.schemas import RunKey
from tests.producer.leases import foreign_lease, write_lease
from tests.support.audit import all_pairs, audit, report
from tests.support.cli import child_env
from tests.support.kafka import topic_settings
from tests.support.processes import durable, model_server, one_line_error, requests_in, start
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

MODEL = "offline/gpt-4o"
SAMPLES, EPOCHS = 30, 2
# Renewed by the winner while it runs: 2 s expired once under a busy machine's stalls (the
# winner then stops, rightly), and nothing here waits for a lease to expire.
LEASE_TTL_S = 15.0


def run_args(run_id: str, base_url: str, *options: str) -> list[str]:
    return [
        *["run", "arith", "--model", MODEL, "--run-id", run_id, "--json"],
        *["--limit", str(SAMPLES), "--epochs", str(EPOCHS), "--base-url", base_url, *options],
    ]


def finish(process: subprocess.Popen[str]) -> tuple[int, str]:
    _, err = process.communicate(timeout=120)
    return process.returncode, err


@pytest.mark.parametrize("trial", range(3))
def test_of_two_identical_runs_started_together_one_is_refused_before_any_model_call(
    kafka_bootstrap: str, tmp_path: Path, trial: int
) -> None:
    began = time.monotonic()
    settings = topic_settings(kafka_bootstrap)
    env = child_env(settings, RESULTLOG_LEASE_TTL_S=str(LEASE_TTL_S))
    # The winner holds the lease while it runs: at 20 ms a call its 60 pairs took ~0.2 s, less
    # than the two processes' start-ups can drift apart on a busy machine, and a twin that
    # starts after the other finished finds the run done and exits 0 as well.
    with model_server(tmp_path / "model", env, "--latency-ms", "250") as (url, log):
        reference = start(run_args("alone", url), env)
        assert finish(reference)[0] == 0
        alone = Counter(requests_in(log))

        twins = [start(run_args("twin", url), env) for _ in range(2)]
        outcomes = [finish(process) for process in twins]
        asked = Counter(requests_in(log)[sum(alone.values()) :])
    codes = sorted(code for code, _ in outcomes)
    assert codes == [0, 1], outcomes
    winner, loser = (twins[0], twins[1]) if outcomes[0][0] == 0 else (twins[1], twins[0])
    one_line_error(finish(loser), f"pid {winner.pid} since")
    assert asked == alone, "the refused run asked the model"
    checked = audit(settings, RunKey("twin", "arith", MODEL), all_pairs(SAMPLES, EPOCHS))
    assert checked.clean
    report(
        "two identical runs",
        trial=trial,
        pairs=SAMPLES * EPOCHS,
        model_calls=sum(asked.values()),
        alone=sum(alone.values()),
        lost=checked.lost,
        duplicates=checked.duplicates,
        seconds=round(time.monotonic() - began, 1),
    )


def test_a_sigkilled_holder_does_not_block_the_next_run_on_the_same_machine(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = topic_settings(kafka_bootstrap)
    env = child_env(settings)  # the default time to live: the dead pid is what frees the lease
    run_key = RunKey("killed", "arith", MODEL)
    with model_server(tmp_path / "model", env, "--latency-ms", "100") as (url, log):
        holder = start(run_args("killed", url, "--concurrency", "2"), env)
        wait_for(lambda: len(durable(settings, run_key)) >= 10, "10 durable pairs")
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        kept = {(r.sample_id, r.epoch) for r in durable(settings, run_key) if not r.degraded}
        before = len(requests_in(log))
        killed_at = time.monotonic()
        code, err = finish(start(run_args("killed", url, "--concurrency", "8"), env))
        assert code == 0, err
        assert not kept & set(requests_in(log)[before:])
    assert audit(settings, run_key, all_pairs(SAMPLES, EPOCHS)).lost == 0
    report("SIGKILLed holder, same machine", resumed_after_s=round(time.monotonic() - killed_at, 1))


def test_a_crashed_remote_holder_blocks_overlapping_runs_until_its_lease_expires(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = topic_settings(kafka_bootstrap)
    env = child_env(settings)
    run_key = RunKey("remote", "arith", MODEL)
    with model_server(tmp_path / "model", env, "--latency-ms", "1") as (url, log):
        # Long enough to outlive two process start-ups on a busy machine.
        crashed = write_lease(settings, run_key, foreign_lease(ttl_s=15, start=0, end=20))
        code, err = finish(start(run_args("remote", url, "--range", "10:30"), env))
        line = one_line_error((code, err), "leased by host worker-7 pid 4242 since")
        assert "expires in" in line and not requests_in(log)
        # Disjoint ranges of one run key are other chunks: no conflict.
        code, err = finish(start(run_args("remote", url, "--range", "20:30"), env))
        assert code == 0, err
        time.sleep(max(0.0, crashed.expires_ms / 1000 - time.time()))
        code, err = finish(start(run_args("remote", url, "--range", "0:20"), env))
        assert code == 0, err
    assert audit(settings, run_key, all_pairs(SAMPLES, EPOCHS)).lost == 0


def test_runs_of_disjoint_ranges_go_on_together_and_overlapping_ones_do_not(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    settings = topic_settings(kafka_bootstrap)
    env = child_env(settings)
    with model_server(tmp_path / "model", env, "--latency-ms", "50") as (url, log):
        halves = [start(run_args("halves", url, "--range", r), env) for r in ("0:15", "15:30")]
        assert [finish(process)[0] for process in halves] == [0, 0]
        # Each pair asked by one of them: once, and up to 3 retries of a 429 or 500.
        assert max(Counter(requests_in(log)).values()) <= 4
        overlapping = [
            start(run_args("overlap", url, "--range", r), env) for r in ("0:20", "10:30")
        ]
        codes = sorted(finish(process)[0] for process in overlapping)
    assert codes in ([0, 0], [0, 1])  # the second may start after the first finished
    assert audit(settings, RunKey("halves", "arith", MODEL), all_pairs(SAMPLES, EPOCHS)).clean
