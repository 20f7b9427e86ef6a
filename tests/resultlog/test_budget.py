"""Budgets (design rule 11): `resultlog run --budget-usd` as a process, a real broker and the
offline model as its own process (20 ms a request), whose request log says what was paid."""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from resultlog.cli._figures import usd
from resultlog.cli._run import BUDGET_EXIT
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.cli import printed_json, run_cli
from tests.support.ledger import table_value
from tests.support.processes import durable, model_server, requests_in

MODEL = "offline/budget"
BUDGET = 0.0005  # about 16 of the offline model's arithmetic answers


@pytest.fixture
def model(tmp_path: Path, cli_env: dict[str, str]) -> Iterator[tuple[str, Path]]:
    """The offline model server's base URL and request log."""
    with model_server(tmp_path / "model", cli_env, "--latency-ms", "20") as served:
        yield served


def run(
    env: dict[str, str], run_id: str, base_url: str, budget: float, *options: str
) -> subprocess.CompletedProcess[str]:
    """`resultlog run arith` of 60 pairs, 8 in flight, with a budget."""
    args = ["run", "arith", "--model", MODEL, "--run-id", run_id, "--limit", "60"]
    args += ["--concurrency", "8", "--base-url", base_url, "--budget-usd", str(budget)]
    return run_cli(env, *args, *options)


def test_the_budget_stops_the_run_and_holds_across_resumes(
    settings: Settings, cli_env: dict[str, str], model: tuple[str, Path], unique_name: str
) -> None:
    base_url, log = model
    run_key = RunKey(unique_name, "arith", MODEL)
    stopped = run(cli_env, unique_name, base_url, BUDGET, "--json")
    assert stopped.returncode == BUDGET_EXIT == 3, stopped.stderr
    [line] = stopped.stderr.strip().splitlines()
    assert line.startswith(f"resultlog: budget: {run_key} has spent ")
    assert f"of its {usd(BUDGET)} USD" in line and "larger --budget-usd" in line
    summary = json.loads(stopped.stdout)
    records = durable(settings, run_key)
    asked = requests_in(log)
    # Within the budget, pairs in flight included, and stopped only when the next pair
    # (reserved at the most a pair has cost) could pass it.
    assert 0 < summary["spent_cost"] <= BUDGET
    assert summary["spent_cost"] + max(r.spent for r in records) > BUDGET
    assert 0 < summary["records"] < 60
    # Everything asked is durable, degraded pairs included.
    assert {(r.sample_id, r.epoch) for r in records} == set(asked)
    assert summary["spent_cost"] == math.fsum(r.spent for r in records)

    again = run(cli_env, unique_name, base_url, BUDGET, "--json")
    assert again.returncode == BUDGET_EXIT and requests_in(log) == asked  # no model call
    assert json.loads(again.stdout)["spent_cost"] == summary["spent_cost"]
    status = printed_json(run_cli(cli_env, "status", *_key_args(run_key), "--json"))
    assert status["spent_cost"] == summary["spent_cost"]

    done = run(cli_env, unique_name, base_url, 1.0)
    assert done.returncode == 0, done.stderr
    completed = {(r.sample_id, r.epoch): r for r in records if not r.degraded}
    assert not set(requests_in(log)[len(asked) :]) & set(completed)  # none paid twice
    final = durable(settings, run_key)
    assert len(final) == 60
    saved = math.fsum(r.usage.total_cost for r in completed.values() if r.usage is not None)
    assert table_value(done.stdout, "saved by the resume (USD)") == usd(saved)
    spent = math.fsum(r.spent for r in final)
    assert table_value(done.stdout, "spent, every attempt (USD)") == usd(spent)
    kept = math.fsum(r.usage.total_cost for r in final if r.usage is not None)
    assert table_value(done.stdout, "kept, these records (USD)") == usd(kept)
    assert table_value(done.stdout, "pairs skipped (durable already)") == str(len(completed))


def test_a_spent_budget_starts_nothing(
    cli_env: dict[str, str], model: tuple[str, Path], unique_name: str
) -> None:
    base_url, log = model
    stopped = run(cli_env, unique_name, base_url, 0.0, "--json")
    assert stopped.returncode == BUDGET_EXIT
    assert "60 pair(s) not started" in stopped.stderr
    assert requests_in(log) == []


def test_max_pair_usd_bounds_the_first_pairs_unknown_cost(
    cli_env: dict[str, str], model: tuple[str, Path], unique_name: str
) -> None:
    base_url, log = model
    # One pair costs about 0.00003: said to cost up to 0.0001, none fits in 0.00005.
    bounded = run(cli_env, unique_name, base_url, 0.00005, "--max-pair-usd", "0.0001")
    assert bounded.returncode == BUDGET_EXIT, bounded.stderr
    assert requests_in(log) == []
    # Without the bound, the first pair (alone) is paid to learn its cost, and no more.
    learnt = run(cli_env, unique_name + "-learnt", base_url, 0.00005)
    assert learnt.returncode == BUDGET_EXIT, learnt.stderr
    assert len(requests_in(log)) == 1


def test_max_pair_usd_without_a_budget_is_refused(cli_env: dict[str, str]) -> None:
    args = ["run", "arith", "--model", MODEL, "--run-id", "r", "--max-pair-usd", "0.1"]
    refused = run_cli(cli_env, *args)
    assert refused.returncode != 0
    assert refused.stderr.strip() == (
        "resultlog: error: --max-pair-usd bounds a budget's first pairs: give --budget-usd too"
    )


def _key_args(run_key: RunKey) -> list[str]:
    key = run_key
    return ["--run-id", key.run_id, "--benchmark", key.benchmark_id, "--model", key.model]
