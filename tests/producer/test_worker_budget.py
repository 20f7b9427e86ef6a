"""Workers and the bill: a submitted budget is honoured (each chunk keeps to its share), and a
task whose configuration differs from the log's is refused before any model call."""

from __future__ import annotations

import dataclasses
import math

from resultlog.consumers import fold
from resultlog.consumers.work import WorkProgress
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import ModelServer
from resultlog.producer.worker import CHUNK_FAILED, RunSpec, plan_chunks, submit_chunks
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.kafka import read_topic, stored_records
from tests.support.work import serve_until

MODEL = "offline/gpt-4o"
BUDGET = 0.0005  # about 16 of the offline model's arithmetic answers, 8 per chunk


def _settings(settings: Settings, unique_name: str) -> Settings:
    return settings.model_copy(
        update={
            "work_group": f"{unique_name}.workers",
            "work_max_attempts": 1,
            "model_max_retries": 0,
        }
    )


def test_a_worker_keeps_each_chunk_to_its_share_of_the_budget(
    settings: Settings, model_server: ModelServer, unique_name: str
) -> None:
    kafka = KafkaConnection(_settings(settings, unique_name))
    url = model_server.base_url
    tasks = plan_chunks(
        RunSpec("arith", MODEL, "capped", 2, limit=40, base_url=url, budget_usd=BUDGET)
    )
    assert submit_chunks(kafka, tasks) == 2
    report = serve_until(kafka, settled=2)

    assert (report.chunks_run, report.budget_stopped, report.dead_lettered) == (2, 2, 0)
    records = stored_records(kafka.settings, RunKey("capped", "arith", MODEL))
    summary = fold(records)
    assert 0 < summary.spent_cost <= BUDGET and summary.records < 40
    for task in tasks:  # each chunk within its share: half the budget
        mine = [r for r in records if task.start <= r.sample_index < task.end]
        assert 0 < math.fsum(r.spent for r in mine) <= BUDGET / 2
        assert {r.chunk_index for r in mine} == {task.chunk_index}
    asked = len(model_server.requests)
    assert asked == len(records)  # each pair asked once, and durable
    # Settled with pairs missing: `status` says stopped, never done.
    progress = WorkProgress.read(
        kafka, RunKey("capped", "arith", MODEL), records, kafka.settings.work_group
    )
    assert progress is not None
    assert (progress.count("done"), progress.count("stopped")) == (0, 2)

    assert submit_chunks(kafka, tasks) == 2  # the same budget again: nothing more is paid
    again = serve_until(kafka, settled=4)
    assert (again.chunks_run, again.budget_stopped, again.pairs_evaluated) == (2, 2, 0)
    assert len(model_server.requests) == asked


def test_a_worker_refuses_a_task_of_another_configuration(
    settings: Settings, model_server: ModelServer, unique_name: str
) -> None:
    kafka = KafkaConnection(_settings(settings, unique_name))
    spec = RunSpec("arith", MODEL, "cfg", chunks=1, limit=4, base_url=model_server.base_url)
    assert submit_chunks(kafka, plan_chunks(spec)) == 1
    assert serve_until(kafka, settled=1).chunks_run == 1
    asked = len(model_server.requests)

    hotter = plan_chunks(dataclasses.replace(spec, temperature=0.9))
    assert submit_chunks(kafka, hotter) == 1
    report = serve_until(kafka, settled=2)
    assert (report.chunks_run, report.dead_lettered) == (0, 1)
    [letter] = read_topic(kafka.settings, kafka.settings.work_dlq_topic)
    assert letter.headers["resultlog.reason.kind"] == CHUNK_FAILED
    reason = letter.headers["resultlog.reason"]
    assert "made under another configuration" in reason
    assert "generation.temperature: null there, 0.9 here" in reason
    assert len(model_server.requests) == asked  # refused before any model call
