"""Forty concurrent sample views of different runs: bounded memory, /healthz stays quick.

The samples route reads a run's records from the log. Its reads share one small pool and go
through the run index, so many clients at once queue instead of each scanning a partition
with a reader of its own; without an index (each read a whole partition) they still queue.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.aggregator import path
from tests.support.audit import report
from tests.support.cli import child_env, cli_argv
from tests.support.kafka import delete_topic
from tests.support.records import make_record
from tests.support.runindex import put
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]  # 60,000 records written first

VIEWS = 40
RECORDS = 50  # per viewed run
FILLER = 60_000  # other runs' records, before and after the viewed runs
MAX_RSS_KIB = 1024 * 1024


# GET every path at once (a thread each); print [[status, records], ...] in path order.
_VIEWERS = """
import concurrent.futures, json, sys
import httpx
url, paths = sys.argv[1], sys.argv[2:]
with httpx.Client(timeout=120, limits=httpx.Limits(max_connections=len(paths))) as client:
    def view(path):
        response = client.get(url + path)
        body = response.json() if response.status_code == 200 else {}
        return response.status_code, len(body.get("records", []))
    with concurrent.futures.ThreadPoolExecutor(len(paths)) as pool:
        print(json.dumps(list(pool.map(view, paths))))
"""


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1])


def _filler(start: int, count: int) -> list[SampleResult]:
    keys = [RunKey(f"filler-{i}", "arith", "m") for i in range(12)]
    return [
        make_record((start + i) // 12, 0, run_key=keys[i % 12], epochs=1, dataset_size=None)
        for i in range(count)
    ]


def _log(settings: Settings) -> list[RunKey]:
    runs = [RunKey(f"viewed-{i:02d}", "arith", "m") for i in range(VIEWS)]
    put(settings, _filler(0, FILLER // 2))
    put(
        settings, [make_record(s, 0, run_key=run, epochs=1) for run in runs for s in range(RECORDS)]
    )
    put(settings, _filler(FILLER // 2, FILLER // 2))
    return runs


@pytest.mark.parametrize("index", ["indexed", "no index"])
def test_forty_concurrent_sample_views_keep_memory_and_healthz(
    settings: Settings, index: str, tmp_path: Path
) -> None:
    runs = _log(settings)
    if index == "no index":
        delete_topic(settings, settings.index_topic)
    process = subprocess.Popen(
        cli_argv("aggregator", "--http", "127.0.0.1:0"),
        env=child_env(settings),
        stdout=subprocess.PIPE,
        stderr=(tmp_path / "stderr").open("wb"),
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[-1]
        wait_for(
            lambda: httpx.get(url + "/healthz", timeout=5).status_code == 200,
            "ready",
            timeout_s=180,
        )
        wait_for(
            lambda: httpx.get(url + "/runs?limit=1").headers["x-total-count"] == str(VIEWS + 12),
            "every run served",
        )
        time.sleep(2.0)  # the index's entries and markers are out (every second)
        baseline = _rss_kib(process.pid)

        # The viewers run in a process of their own: their threads would otherwise compete
        # with the prober here for this interpreter, and their wait would count as /healthz's.
        viewers = subprocess.Popen(
            [sys.executable, "-c", _VIEWERS, url, *(path(run) + "/samples" for run in runs)],
            stdout=subprocess.PIPE,
            text=True,
        )
        started = time.monotonic()
        healthz: list[float] = []
        peak = baseline
        with httpx.Client(timeout=10) as prober:
            while viewers.poll() is None:
                asked = time.monotonic()
                assert prober.get(url + "/healthz").status_code == 200
                healthz.append(time.monotonic() - asked)
                peak = max(peak, _rss_kib(process.pid))
                time.sleep(0.1)
        out, _ = viewers.communicate()
        results = [tuple(answer) for answer in json.loads(out)]
        took = time.monotonic() - started
        assert process.poll() is None
    finally:
        process.terminate()
        process.wait(30)
    assert results == [(200, RECORDS)] * VIEWS
    # Goal: under 1 s. On a shared 2-core machine (load average 20 measured) single probes
    # see scheduler outliers of about a second: the bound is on the 95th percentile, and
    # the worst is reported.
    p95 = sorted(healthz)[int(len(healthz) * 0.95)]
    assert p95 < 1.0 and max(healthz) < 2.0, sorted(healthz)[-5:]
    assert peak < MAX_RSS_KIB, peak
    report("concurrent-samples", index=index.replace(" ", "-"), views=VIEWS,
           other_records=FILLER, all_answered_s=f"{took:.1f}",
           p95_healthz_s=f"{p95:.3f}", worst_healthz_s=f"{max(healthz):.3f}",
           rss_mib_before=baseline // 1024, rss_mib_peak=peak // 1024)  # fmt: skip
