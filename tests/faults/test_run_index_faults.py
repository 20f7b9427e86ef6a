"""The run index under faults: a SIGKILLed aggregator mid-write, then readers still exact."""

from __future__ import annotations

import signal
import subprocess
import time

import httpx
import pytest

from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.cli import child_env, cli_argv
from tests.support.kafka import run_partition
from tests.support.records import make_record
from tests.support.runindex import full_scan, put, read_one_run, wait_indexed
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(600)]

RUNS = [RunKey(f"killed-{i}", "arith", "m") for i in range(6)]


def _aggregator(settings: Settings) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        cli_argv("aggregator", "--http", "127.0.0.1:0"),
        env=child_env(settings),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().split()[-1]
    wait_for(lambda: httpx.get(url + "/healthz", timeout=5).status_code == 200, "ready", 180)
    return process


def _batch(round_: int) -> list[SampleResult]:  # some keys rewritten in later rounds
    return [
        make_record(
            s,
            0,
            "C" if (s + round_) % 2 else "I",
            run_key=run,
            epochs=1,
            dataset_size=None,
            created_offset_ms=round_,
        )
        for run in RUNS
        for s in range(round_ * 300, round_ * 300 + 600)
    ]


def test_an_aggregator_killed_while_writing_the_index_leaves_readers_exact(
    settings: Settings,
) -> None:
    process = _aggregator(settings)
    try:
        for round_ in range(4):  # killed while entries and markers are in flight
            put(settings, _batch(round_))
            time.sleep(0.3 * round_)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        for run in RUNS:  # whatever the index holds now, readers agree with a full scan
            assert read_one_run(settings, run).latest == full_scan(settings, run)
        put(settings, _batch(4))
        process = _aggregator(settings)
        ends = {run: max(full_scan(settings, run).values())[0] + 1 for run in RUNS}
        for run in RUNS:
            wait_indexed(settings, run, ends[run])
        for run in RUNS:
            out = read_one_run(settings, run)
            assert out.guided
            assert out.latest == full_scan(settings, run)
    finally:
        process.kill()
        process.wait(30)
    assert len({run_partition(settings, run) for run in RUNS}) > 1  # several partitions
