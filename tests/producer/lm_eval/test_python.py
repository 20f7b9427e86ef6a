"""`resultlog.lm_eval.simple_evaluate` in this process: identity, budgets, replay, reuse."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import resultlog.lm_eval
from resultlog.consumers import replay_run
from resultlog.kafka import KafkaConnection
from resultlog.producer import ConfigChangedError, claim_lease
from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey
from tests.producer.lm_eval.support import (
    CHOICES,
    DOCS,
    MC_TASK,
    TASK,
    write_mc_task,
    write_task,
)

MODEL = "offline"


@pytest.fixture
def server() -> Iterator[ModelServer]:
    """The offline model, no persistent errors (lm-eval stops a run at its first failure)."""
    with ModelServer(latency_s=0.002, error_rate=0.0) as served:
        yield served


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No network for Hugging Face; its caches under the test's directory."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))


def _evaluate(
    kafka: KafkaConnection, run_id: str, server: ModelServer, include: Path, **extra: Any
) -> Any:
    from lm_eval.tasks import TaskManager

    return resultlog.lm_eval.simple_evaluate(
        run_id,
        kafka=kafka,
        **{
            "model": "local-chat-completions",
            "model_args": f"model={MODEL},base_url={server.base_url}/chat/completions",
            "tasks": [TASK],
            "task_manager": TaskManager(include_path=str(include), include_defaults=False),
            "apply_chat_template": True,
            **extra,
        },
    )


def _reported(server: ModelServer, path: str) -> tuple[int, int, float]:
    """The input and output tokens and the cost the server reports for the requests it got,
    asked of it again (it answers a request alike each time)."""
    inputs = outputs = 0
    cost = 0.0
    for request in list(server.requests):
        usage = httpx.post(f"{server.base_url}{path}", json=request.body).json()["usage"]
        inputs += usage["prompt_tokens"]
        outputs += usage["completion_tokens"]
        cost += usage["cost"]
    return inputs, outputs, cost


def test_a_rerun_asks_nothing_and_replay_equals_lm_eval(
    kafka: KafkaConnection, server: ModelServer, tmp_path: Path, unique_name: str
) -> None:
    tasks = write_task(tmp_path / "tasks")
    results = _evaluate(kafka, unique_name, server, tasks, log_samples=False)
    assert "samples" not in results  # not asked for: dropped again after the records
    assert len(server.requests) == DOCS
    key = RunKey(unique_name, TASK, MODEL)
    summary = replay_run(kafka, key).summaries[key]
    assert summary.records == DOCS
    assert summary.accuracy == pytest.approx(results["results"][TASK]["exact_match,extract"])
    assert summary.metrics["scorer:exact_match,extract"] == pytest.approx(summary.accuracy)

    again = _evaluate(kafka, unique_name, server, tasks)
    assert len(server.requests) == DOCS  # every answer served from the log
    assert again["results"][TASK] == results["results"][TASK]
    _assert_usage(kafka, key, server, "/chat/completions")


def _assert_usage(kafka: KafkaConnection, key: RunKey, server: ModelServer, path: str) -> None:
    """Replay carries the tokens and cost the endpoint reported, after a rerun served all."""
    inputs, outputs, cost = _reported(server, path)
    assert inputs > 0 and outputs > 0 and cost > 0
    summary = replay_run(kafka, key).summaries[key]
    assert (summary.usage.input_tokens, summary.usage.output_tokens) == (inputs, outputs)
    assert summary.usage.total_cost == pytest.approx(cost)
    assert summary.spent_cost == pytest.approx(cost)


def test_a_changed_task_is_refused_before_any_request(
    kafka: KafkaConnection, server: ModelServer, tmp_path: Path, unique_name: str
) -> None:
    _evaluate(kafka, unique_name, server, write_task(tmp_path / "v1"), limit=3)
    asked = len(server.requests)
    with pytest.raises(ConfigChangedError, match=r"benchmark\.version: 1\.0 there, 2\.0 here"):
        _evaluate(kafka, unique_name, server, write_task(tmp_path / "v2", version=2.0), limit=3)
    assert len(server.requests) == asked
    accepted = _evaluate(
        kafka,
        unique_name,
        server,
        write_task(tmp_path / "v2", version=2.0),
        limit=3,
        accept_config_change=True,
    )
    assert len(server.requests) == asked  # reused as they are
    assert accepted["results"][TASK]["exact_match,extract"] is not None


def test_the_budget_stops_asking_and_holds_on_a_rerun(
    kafka: KafkaConnection, server: ModelServer, tmp_path: Path, unique_name: str
) -> None:
    tasks = write_task(tmp_path / "tasks")
    with pytest.raises(resultlog.lm_eval.LmEvalBudgetError, match="budget"):
        _evaluate(kafka, unique_name, server, tasks, budget_usd=0.0001)
    asked = len(server.requests)
    assert 0 < asked < DOCS
    with pytest.raises(resultlog.lm_eval.LmEvalBudgetError):
        _evaluate(kafka, unique_name, server, tasks, budget_usd=0.0001)
    assert len(server.requests) == asked  # the durable spend is already at the budget


def test_a_leased_task_is_not_run(
    kafka: KafkaConnection, server: ModelServer, tmp_path: Path, unique_name: str
) -> None:
    key = RunKey(unique_name, TASK, MODEL)
    refused = pytest.raises(resultlog.lm_eval.LmEvalError, match="not running task")
    with claim_lease(kafka, key, (0, 1)), refused:
        _evaluate(kafka, unique_name, server, write_task(tmp_path / "tasks"))
    assert server.requests == []


def test_multiple_choice_log_likelihoods_through_local_completions(
    kafka: KafkaConnection, server: ModelServer, tmp_path: Path, unique_name: str
) -> None:
    extra = {
        "model": "local-completions",
        "model_args": f"model={MODEL},base_url={server.base_url}/completions,"
        "tokenizer_backend=remote,max_retries=1",
        "tasks": [MC_TASK],
        "apply_chat_template": False,
    }
    tasks = write_mc_task(tmp_path / "tasks")
    results = _evaluate(kafka, unique_name, server, tasks, **extra)
    accuracy = results["results"][MC_TASK]["acc,none"]
    assert accuracy > 0.5  # the offline model mostly picks the right sum
    asked = [r for r in server.requests if r.body.get("echo")]
    assert len(asked) == len(server.requests) == DOCS * CHOICES  # one log-likelihood per choice
    key = RunKey(unique_name, MC_TASK, MODEL)
    summary = replay_run(kafka, key).summaries[key]
    assert summary.records == DOCS
    assert summary.accuracy == pytest.approx(accuracy)

    again = _evaluate(kafka, unique_name, server, tasks, **extra)
    assert len(server.requests) == DOCS * CHOICES  # every log-likelihood served from the log
    assert again["results"][MC_TASK]["acc,none"] == accuracy
    _assert_usage(kafka, key, server, "/completions")
