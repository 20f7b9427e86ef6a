"""One budget per run key, whatever its chunks, workers and submissions: `resultlog worker`
processes keep to it through the spend ledger, counted from the model's request log."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from resultlog.settings import Settings
from tests.support.cli import run_cli
from tests.support.waiting import wait_for
from tests.support.work import (
    MODEL,
    all_committed,
    assigned_members,
    last_json,
    model_server_process,
    records_of,
    requests_in,
    work_env,
)

BUDGET = 0.0006  # about 20 of the offline model's arithmetic answers


def _spent(settings: Settings, run_id: str) -> Fraction:
    """The records' spend, summed exactly as the budget sums it (a float sum rounds)."""
    return sum((Fraction(record.spent) for record in records_of(settings, run_id)), Fraction(0))


def _status(env: dict[str, str], run_id: str) -> dict[str, Any]:
    run_key = ["--run-id", run_id, "--benchmark", "arith", "--model", MODEL]
    chunks = last_json(run_cli(env, "status", *run_key, "--json"))["chunks"]
    assert isinstance(chunks, dict)
    return chunks


@dataclass
class _Group:
    """Worker processes of one group, their environment and the model they ask."""

    settings: Settings
    env: dict[str, str]
    base_url: str
    log: Path
    group: str
    reports: list[str] = field(default_factory=list)

    def submit(self, run_id: str, *args: str) -> None:
        """Submit a run of arith and wait until the group has settled every chunk."""
        argv = ["submit", "arith", "--model", MODEL, "--run-id", run_id, "--base-url"]
        done = run_cli(self.env, *argv, self.base_url, *args)
        assert done.returncode == 0, done.stderr
        wait_for(lambda: all_committed(self.settings, self.group), f"{run_id} to settle", 180)


@contextlib.contextmanager
def _workers(
    settings: Settings,
    cli_env: dict[str, str],
    tmp_path: Path,
    spawn: Callable[..., subprocess.Popen[str]],
    count: int,
) -> Iterator[_Group]:
    """`count` worker processes (3 pairs at a time each) and an offline model of 100 ms."""
    group = f"{settings.work_topic}.workers"
    env = work_env(cli_env, group)
    with model_server_process(tmp_path, env, latency_ms=100) as (base_url, log):
        workers = [spawn(env, "--concurrency", "3") for _ in range(count)]
        wait_for(lambda: assigned_members(settings, group) == count, f"{count} members")
        served = _Group(settings, env, base_url, log, group)
        yield served
        for worker in workers:
            worker.terminate()
        served.reports = [worker.communicate(timeout=60)[1] for worker in workers]


def test_a_resubmission_with_more_chunks_keeps_to_the_same_budget(
    settings: Settings,
    cli_env: dict[str, str],
    tmp_path: Path,
    spawn: Callable[..., subprocess.Popen[str]],
) -> None:
    with _workers(settings, cli_env, tmp_path, spawn, 2) as group:
        budget = ["--limit", "80", "--budget-usd", str(BUDGET)]
        group.submit("more", "--chunks", "2", *budget)
        first = _spent(settings, "more")
        asked_first = sum(requests_in(group.log).values())
        group.submit("more", "--chunks", "4", *budget)
    asked = requests_in(group.log)

    records = records_of(settings, "more")
    spent = _spent(settings, "more")
    most = max(Fraction(record.spent) for record in records)
    limit = Fraction(BUDGET)
    # Every request is a durable record's (no pair asked twice), so the records' spend is
    # every request's; it stays within the budget but for what a pair in flight cost
    # beyond its reservation (the most one pair had cost), never by a pair per chunk.
    assert sum(asked.values()) == len(asked) == len(records) < 80
    figures = f"{float(first)} after 2 chunks, {float(spent)} after 4 (pair <= {float(most)})"
    print(f"budget {BUDGET}: {figures}")
    assert spent <= limit + most / 2, (first, spent, group.reports)
    # Exactly: 19 pairs of 3e-05 leave 3e-05 of 0.0006, yet 20 of them pass it by 5e-20 (the
    # floats' binary values); in floats the two sides round to the same 0.00057.
    assert limit - most < first <= spent
    assert sum(asked.values()) == asked_first, "the same budget paid for more pairs"
    # Settled; a chunk whose samples the first submission finished is done, the rest stopped.
    chunks = _status(group.env, "more")
    assert chunks["stopped"] >= 2 and chunks["done"] + chunks["stopped"] == 4, chunks


def test_many_chunks_and_a_tiny_budget_pay_for_one_pair_at_most(
    settings: Settings,
    cli_env: dict[str, str],
    tmp_path: Path,
    spawn: Callable[..., subprocess.Popen[str]],
) -> None:
    tiny = ["--chunks", "6", "--limit", "60", "--budget-usd", "0.00005"]
    with _workers(settings, cli_env, tmp_path, spawn, 3) as group:
        # A bound on an unknown pair above the budget: nothing may start at all.
        group.submit("bounded", *tiny, "--max-pair-usd", "0.0001")
        assert requests_in(group.log) == {}, "a pair started beyond --max-pair-usd"
        # Without a bound: the first pair runs alone, its cost is the estimate for the rest.
        group.submit("tiny", *tiny)
    asked = requests_in(group.log)

    records = records_of(settings, "tiny")
    assert len(records) == len(asked) == sum(asked.values()) == 1, group.reports
    assert _spent(settings, "tiny") <= Fraction(0.00005)
    assert records_of(settings, "bounded") == []
    chunks = _status(group.env, "tiny")
    assert (chunks["done"], chunks["stopped"]) == (0, 6), chunks
