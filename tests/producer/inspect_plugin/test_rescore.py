"""`resultlog rescore` of a real `inspect eval` run with an Inspect AI scorer, against
`inspect_ai.score` of the eval's own log; and the compare's McNemar test of the two runs."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from inspect_ai import score
from inspect_ai.log import EvalLog
from inspect_ai.scorer import includes

from resultlog.analysis import compare_df
from resultlog.consumers import replay_run
from resultlog.kafka import KafkaConnection
from resultlog.producer.inspect._payload import decode
from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey, RunSummary
from resultlog.settings import Settings
from tests.producer.inspect_plugin.support import (
    MODEL,
    TASK_NAME,
    fresh_settings,
    inspect_env,
    inspect_eval,
    latest,
    only_log,
    run_key,
)
from tests.support.aggregator import path, running, serving
from tests.support.cli import child_env, run_cli
from tests.support.page import compare_query
from tests.support.waiting import wait_for

RESCORED = RunKey("orig-includes", TASK_NAME, MODEL)
EXACT = RunKey("orig-exact", TASK_NAME, MODEL)  # "The answer is N." is never exactly "N"


@dataclass(frozen=True)
class Rescored:
    """An eval, its Inspect log, and its rescore with `includes`: output and requests made."""

    settings: Settings
    log: EvalLog
    output: str
    requests_during_rescore: int


@pytest.fixture(scope="module")
def rescored(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rescored]:
    """`inspect eval` of the example task as run "orig" (wrong answers often, so `includes`
    and `match` disagree on some), then `resultlog rescore` of it with `includes`."""
    settings = fresh_settings(kafka_bootstrap)
    log_dir = tmp_path_factory.mktemp("rescore-logs")
    env = child_env(settings)
    with ModelServer(latency_s=0.002, wrong_rate=0.5, error_rate=0.0) as server:
        done = inspect_eval(inspect_env(env, server), "orig", log_dir)
        assert done.returncode == 0, done.stdout + done.stderr
        asked = len(server.requests)
        rescore = _rescore(env, "inspect_ai.scorer:includes", RESCORED)
        exact = _rescore(env, "exact", EXACT)
        during = len(server.requests) - asked
    assert rescore.returncode == 0, rescore.stderr
    assert exact.returncode == 0, exact.stderr
    yield Rescored(settings, only_log(log_dir), rescore.stdout, during)


def _rescore(env: dict[str, str], scorer: str, as_run: RunKey) -> subprocess.CompletedProcess[str]:
    """`resultlog rescore` of run "orig" with `scorer`, as `as_run`."""
    key = run_key("orig")
    return run_cli(
        env,
        "rescore",
        *("--run-id", key.run_id, "--benchmark", key.benchmark_id, "--model", key.model),
        *("--scorer", scorer, "--as", as_run.run_id),
    )


def _summary(settings: Settings, key: RunKey) -> RunSummary:
    with KafkaConnection(settings) as kafka:
        return replay_run(kafka, key).summaries[key]


def test_a_rescore_without_a_grader_makes_no_model_request(rescored: Rescored) -> None:
    assert rescored.requests_during_rescore == 0
    assert "new spend 0.000000 USD" in rescored.output


def test_the_rescored_accuracy_is_inspect_s_score_of_its_log_with_includes(
    rescored: Rescored, monkeypatch: pytest.MonkeyPatch
) -> None:
    # inspect_ai.score makes the log's model (never asked by includes): it wants its provider's
    # variables set. Nothing listens there.
    monkeypatch.setenv("OFFLINE_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OFFLINE_API_KEY", "unused")
    scored = score(rescored.log, [includes()], display="none")
    assert scored.results is not None
    [by_includes] = [s for s in scored.results.scores if s.name == "includes"]
    expected = by_includes.metrics["accuracy"].value
    assert 0.0 < expected < 1.0  # a mix of right and wrong: the comparison means something
    summary = _summary(rescored.settings, RESCORED)
    assert summary.accuracy == expected
    assert summary.metrics["scorer:includes"] == expected
    assert summary.records == len(latest(rescored.settings, "orig"))


def test_the_rescored_records_keep_inspect_s_answers_and_scores_by_includes(
    rescored: Rescored,
) -> None:
    source = {(r.sample_id, r.epoch): r for r in latest(rescored.settings, "orig")}
    for record in latest(rescored.settings, RESCORED.run_id):
        before = source[(record.sample_id, record.epoch)]
        assert record.messages == before.messages and record.usage == before.usage
        assert record.harness == before.harness and record.harness_payload is not None
        assert set(record.score.metrics) == {"scorer:includes"}
        # The payload's sample carries the new score, so a rebuilt Inspect log shows it.
        sample = decode(record.harness_payload).sample
        assert sample.scores is not None and list(sample.scores) == ["includes"]
        assert (
            sample.output.completion
            == decode(before.harness_payload or b"").sample.output.completion
        )


@pytest.mark.parametrize("rescore", [RESCORED, EXACT], ids=["includes", "exact"])
def test_compare_gives_the_exact_mcnemar_p_value_of_the_flips(
    rescored: Rescored, rescore: RunKey
) -> None:
    table = compare_df(run_key("orig"), rescore, kafka=rescored.settings)
    flips = table["flip"].value_counts().to_dict()
    b, c = flips.get("c_to_i", 0), flips.get("i_to_c", 0)
    n = b + c
    tail = sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n
    assert table.attrs["mcnemar_p"] == pytest.approx(min(1.0, 2 * tail), rel=1e-12)
    if rescore == EXACT:  # every sample correct by match is wrong by exact: flips, one way
        assert b > 0 and c == 0 and table.attrs["mcnemar_p"] < 1.0
    assert table.attrs["difference"]["interval"] == "clustered"  # two epochs per sample
    # A run id alone names the run when one run key has it.
    by_id = compare_df("orig", rescore.run_id, kafka=rescored.settings)
    assert by_id.attrs["mcnemar_p"] == table.attrs["mcnemar_p"]


def test_the_aggregator_and_its_compare_treat_the_rescored_run_as_any_run(
    rescored: Rescored,
) -> None:
    summary = _summary(rescored.settings, RESCORED)
    table = compare_df(run_key("orig"), RESCORED, kafka=rescored.settings)
    with running(rescored.settings) as aggregator, serving(aggregator) as base_url:

        def served_records() -> int | None:
            answer = httpx.get(base_url + path(RESCORED), timeout=5)
            return answer.json()["records"] if answer.status_code == 200 else None

        assert wait_for(served_records, "the rescored run's summary") == summary.records
        served = httpx.get(base_url + path(RESCORED), timeout=5).json()
        assert served["accuracy"] == summary.accuracy
        query = compare_query(run_key("orig"), RESCORED)
        compared = httpx.get(f"{base_url}/compare?{query}", timeout=5).json()
        assert compared["mcnemar_p"] == table.attrs["mcnemar_p"]
        assert compared["flips"] == table.attrs["flips"]
