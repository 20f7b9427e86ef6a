"""One run shape (design rule 8): the worker, the aggregator and replay give one summary.

Real processes against a real broker: `resultlog run` (its printed summary), `resultlog
replay` and a running aggregator's HTTP answer, after re-running a run id with fewer epochs,
a smaller `--limit`, and over different `--range`s.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from resultlog.producer.offline import is_expected_degraded
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.aggregator import path, running, serving
from tests.support.cli import printed_json, run_cli
from tests.support.summaries import bare
from tests.support.waiting import wait_for

MODEL = "offline/shape"


def resultlog(env: dict[str, str], *args: str) -> dict[str, Any]:
    """Run `resultlog ARGS --json` and return the JSON it printed."""
    return printed_json(run_cli(env, *args, "--json"))


def run(env: dict[str, str], run_id: str, *options: str) -> dict[str, Any]:
    """The worker's printed summary of one `resultlog run arith`."""
    return resultlog(env, "run", "arith", "--model", MODEL, "--run-id", run_id, *options)


def three_readers(settings: Settings, env: dict[str, str], run_id: str) -> dict[str, Any]:
    """Replay's summary, after checking that the aggregator serves the same."""
    run_key = RunKey(run_id, "arith", MODEL)
    args = ["--run-id", run_id, "--benchmark", "arith", "--model", MODEL]
    replayed = bare(resultlog(env, "replay", *args))
    with running(settings) as aggregator, serving(aggregator) as base_url:

        def same() -> bool | None:
            answer = httpx.get(base_url + path(run_key), timeout=5)
            return (answer.status_code == 200 and bare(answer.json()) == replayed) or None

        wait_for(same, "the aggregator to serve replay's summary")
    return replayed


@pytest.mark.parametrize(
    ("first", "second", "records", "out_of_shape"),
    [
        pytest.param(["--epochs", "3", "--limit", "20"], ["--epochs", "2", "--limit", "20"],
                     40, 20, id="fewer-epochs"),
        pytest.param(["--epochs", "2", "--limit", "30"], ["--epochs", "2", "--limit", "20"],
                     40, 20, id="smaller-limit"),
    ],
)  # fmt: skip
def test_a_rerun_with_another_shape_gives_one_summary(
    settings: Settings,
    cli_env: dict[str, str],
    unique_name: str,
    first: list[str],
    second: list[str],
    records: int,
    out_of_shape: int,
) -> None:
    # The offline server degrades a fixed few pairs every time: the re-run writes those again,
    # in the new shape, so its newest record defines the run. (19, 1) is one of them.
    assert is_expected_degraded("arith-0019", 1)
    run(cli_env, unique_name, *first)
    worker = bare(run(cli_env, unique_name, *second))
    assert (worker["records"], worker["out_of_shape"]) == (records, out_of_shape)
    assert worker["expected_records"] == records
    assert three_readers(settings, cli_env, unique_name) == worker


def test_runs_over_different_ranges_give_one_summary(
    settings: Settings, cli_env: dict[str, str], unique_name: str
) -> None:
    run(cli_env, unique_name, "--epochs", "2", "--limit", "30", "--range", "0:10")
    run(cli_env, unique_name, "--epochs", "2", "--limit", "30", "--range", "20:30")
    worker = bare(run(cli_env, unique_name, "--epochs", "2", "--limit", "30", "--range", "10:20"))
    assert (worker["records"], worker["expected_records"], worker["out_of_shape"]) == (60, 60, 0)
    assert three_readers(settings, cli_env, unique_name) == worker
