"""The hooks in-process: the durable guard of resume, and refusing an untested Inspect."""

from __future__ import annotations

from pathlib import Path

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import GenerateConfig, ModelOutput, get_model
from inspect_ai.scorer import match
from inspect_ai.solver import generate

from resultlog.consumers import read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.producer.inspect import InspectPluginError, _xbench
from resultlog.producer.inspect._hooks import refusing
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.producer.inspect_plugin.support import mock_answer

ASKED: list[str] = []


def _answer(*args: object) -> ModelOutput:
    config = args[-1]
    assert isinstance(config, GenerateConfig)
    ASKED.append(str((config.extra_body or {}).get("x_bench")))
    return mock_answer(*args)  # type: ignore[arg-type]


def test_a_pair_resume_found_durable_fails_before_any_model_call_and_is_not_written(
    settings: Settings, cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in cli_env.items():
        if name.startswith("RESULTLOG_"):
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("RESULTLOG_RUN_ID", "guarded")
    task = Task(
        dataset=[Sample(id="a", input="What is 3 + 4?", target="7")],
        solver=generate(),
        scorer=match(numeric=True),
        epochs=2,
        name="guarded",
    )
    run_key = RunKey("guarded", "guarded", "mockllm/model")
    ASKED.clear()
    with refusing({run_key: frozenset({("a", 1)})}):
        [log] = eval(
            task,
            model=get_model("mockllm/model", custom_outputs=_answer),
            display="none",
            log_dir=str(tmp_path),
        )
    assert log.status == "error"
    assert log.error is not None and "already durable in the results log" in log.error.message
    assert "'sample_epoch': 1" not in " ".join(ASKED)
    records = read_run_records(KafkaConnection(settings), run_key).records
    assert all((r.sample_id, r.epoch) != ("a", 1) for r in records)


def test_an_inspect_outside_the_tested_range_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_xbench, "inspect_version", lambda: (0, 4, 0))
    with pytest.raises(InspectPluginError, match=r"inspect-ai 0\.4\.0 is outside the tested"):
        _xbench.check()
