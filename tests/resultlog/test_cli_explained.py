"""What `run` and `status` print for people says what each number counts."""

from __future__ import annotations

from resultlog.settings import Settings
from tests.support.cli import child_env, run_cli


def _unwrapped(text: str) -> str:
    return " ".join(text.split())


def test_the_run_table_and_the_status_explain_their_numbers(settings: Settings) -> None:
    env = {**child_env(settings), "COLUMNS": "200"}  # rich wraps to the terminal's width
    key = ["--run-id", "explained", "--model", "m"]
    ran = run_cli(env, "run", "arith", *key, "--epochs", "2", "--limit", "6")
    assert ran.returncode == 0, ran.stderr
    table = _unwrapped(ran.stdout)
    for row in (
        "correct: questions scoring >= 0.5 over their epochs",
        "accuracy: mean of the questions' scores",
        "metric reward: mean over scored records",
        "generation time, summed over records (ms)",
        "spent, every attempt (USD, simulated)",
        "the offline model server bills made-up prices: no money was spent",
    ):
        assert row in table, row
    assert " of 6 " in table  # correct N of the questions scored

    status = run_cli(env, "status", *key, "--benchmark", "arith")
    assert status.returncode == 0, status.stderr
    lines = {line.split(":", 1)[0].strip(): line for line in status.stdout.splitlines()}
    assert (
        "(pairs a re-run skips: the completed ones within the epochs asked)" in lines["skip_list"]
    )
    assert "(pairs durable and not degraded)" in lines["completed"]
