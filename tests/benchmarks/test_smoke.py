"""Every benchmark module runs end to end against the real broker at its tiniest arguments.

`make bench` is long and nobody watches it start: a benchmark that dies at once (an argument
renamed, a helper's signature changed) used to go unnoticed until its row was missing. Each
module runs here as `python -m benchmarks.X`, as bench.sh runs it, and must exit 0 having
written its Result lines. Figures are never asserted: these counts measure nothing.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 240.0

# Module -> (its tiniest arguments that still run it end to end, the Result lines it writes).
SMOKE: dict[str, tuple[str, int]] = {
    "cli_startup": ("--repeats 1", 2),
    "one_run_commands": ("--others 2000 --repeats 1", 3),
    "codec": ("-n 200 --repeats 1", 0),  # prints its table only
    "fold_decode": ("-n 200 --repeats 1", 2),
    "replay": ("--records 2000", 1),
    "resume": ("--samples 500 --others 2000", 2),
    "aggregator_latency": ("--rates 200 --seconds 1", 1),
    "ingest": ("--records 2000", 1),
    "rebuild": ("--records 2000 --tail 10", 2),
    "fold_memory": ("--records 2000", 2),
    "peer_quix": ("--records 2000", 2),
    "write_path": ("--samples 20 --epochs 1 --rounds 1 --concurrency 4", 1),
    "shared_budget": ("--samples 10 --rounds 1 --concurrency 2", 1),
    "scale": ("--workers 1,2 --samples 8 --epochs 1 --chunks 2 --partitions 2 --latency-ms 1", 1),
    "history": ("--others 0,2000,4000", 11),  # 4 reads x 2 counts, RSS, 2 restarts
    "failover": ("--records 4000 --replicas 1 --tail 2000", 1),
}
# history waits a save interval of the aggregator's stores at each count before it reads.
ENV = {"history": {"RESULTLOG_AGGREGATOR_SAVE_INTERVAL_S": "1"}}


def test_every_benchmark_module_is_smoke_tested() -> None:
    modules = {p.stem for p in (REPO / "benchmarks").glob("*.py") if not p.stem.startswith("_")}
    assert modules == set(SMOKE)


@pytest.mark.slow
@pytest.mark.timeout(TIMEOUT_S + 60)
@pytest.mark.parametrize("module", sorted(SMOKE))
def test_the_benchmark_runs_and_writes_its_results(
    module: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    if module == "peer_quix":
        _peer_venv_or_skip()
    arguments, expected = SMOKE[module]
    args = arguments.split()
    results = tmp_path / "results.jsonl"
    if expected:
        args = [*args, "--results", str(results)]
    env = {k: v for k, v in os.environ.items() if k != "RESULTLOG_BENCH_RESULTS"}
    env |= {"RESULTLOG_BOOTSTRAP_SERVERS": kafka_bootstrap, **ENV.get(module, {})}
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = results.read_text(encoding="utf-8").splitlines() if results.exists() else []
    assert len(lines) == expected, lines
    for line in lines:
        _check_result(json.loads(line), done.stdout)
    if not expected:
        assert done.stdout.count(" ok ") + done.stdout.count(" OVER ") == 4, done.stdout


def _check_result(found: dict[str, Any], printed: str) -> None:
    """A Result line of `benchmarks._results`: a finite figure, its fold path, printed too."""
    assert found["what"] in printed
    assert isinstance(found["ours"], float) and math.isfinite(found["ours"]), found
    assert found["unit"]
    assert found["fold_path"].startswith(("compiled", "pure Python")), found


def _peer_venv_or_skip() -> None:
    """Make (or reuse) the Quix Streams venv; skip only when pip cannot make it."""
    from benchmarks.peer_quix import peer_python

    try:
        peer_python()
    except (subprocess.CalledProcessError, OSError) as exc:
        pytest.skip(f"the Quix Streams venv cannot be made (no network to PyPI?): {exc}")
