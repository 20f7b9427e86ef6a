"""Workers and the bill: a submitted budget is the run key's, kept by every chunk together
through the spend ledger, and a task whose configuration differs from the log's is refused
before any model call."""

from __future__ import annotations

import dataclasses

from resultlog.consumers import fold_records, read_run_records
from resultlog.consumers.work import WorkProgress
from resultlog.kafka import KafkaConnection
from resultlog.producer import purge_run
from resultlog.producer.offline import Behavior, ModelServer
from resultlog.producer.spend import LedgerEntry, open_ledger
from resultlog.producer.worker import CHUNK_FAILED, RunSpec, plan_chunks, submit_chunks
from resultlog.schemas import RunKey, encode_key
from resultlog.settings import Settings
from tests.support.kafka import read_topic, stored_records
from tests.support.work import serve_until

MODEL = "offline/gpt-4o"
BUDGET = 0.0005  # about 16 of the offline model's arithmetic answers


def _settings(settings: Settings, unique_name: str) -> Settings:
    return settings.model_copy(
        update={
            "work_group": f"{unique_name}.workers",
            "work_max_attempts": 1,
            "model_max_retries": 0,
        }
    )


def test_a_worker_keeps_the_chunks_to_one_budget(
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
    summary = fold_records(records)
    most = max(r.spent for r in records)
    # One budget for both chunks: together they spend it, not each half of it.
    assert BUDGET - most < summary.spent_cost <= BUDGET and summary.records < 40
    for task in tasks:
        mine = [r for r in records if task.start <= r.sample_index < task.end]
        assert {r.chunk_index for r in mine} <= {task.chunk_index}
    # The ledger holds every paid pair's spend, and no reservation outlives its chunk.
    ledger = {m.key: m.value for m in read_topic(kafka.settings, kafka.settings.spend_topic)}
    entries = {key: LedgerEntry.model_validate_json(value or b"") for key, value in ledger.items()}
    assert {entry.state for entry in entries.values()} == {"settled"}
    for record in records:
        key = encode_key(record.run_key, record.sample_index, record.epoch)
        assert entries[key].spent == record.spent
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


def test_a_purged_run_key_starts_its_budget_from_nothing(
    settings: Settings, model_server: ModelServer, unique_name: str
) -> None:
    kafka = KafkaConnection(_settings(settings, unique_name))
    run_key = RunKey("purged", "arith", MODEL)
    spec = RunSpec("arith", MODEL, "purged", 2, limit=20, base_url=model_server.base_url)
    tasks = plan_chunks(dataclasses.replace(spec, budget_usd=BUDGET / 4))
    assert submit_chunks(kafka, tasks) == 2
    assert serve_until(kafka, settled=2).budget_stopped == 2
    spent = fold_records(stored_records(kafka.settings, run_key)).spent_cost
    assert 0 < spent <= BUDGET / 4

    purge_run(kafka, run_key)
    with open_ledger(kafka, run_key, "test") as ledger:
        assert ledger.pairs == {}
    asked = len(model_server.requests)
    assert submit_chunks(kafka, tasks) == 2  # the same budget, spent again from nothing
    assert serve_until(kafka, settled=4).budget_stopped == 2
    records = read_run_records(kafka, run_key).records
    most = max(r.spent for r in records)
    assert BUDGET / 4 - most < fold_records(records).spent_cost <= BUDGET / 4
    assert len(model_server.requests) - asked == len(records)


def test_a_dead_lettered_chunk_is_failed_in_status_whatever_its_records(
    settings: Settings, model_server: ModelServer, unique_name: str
) -> None:
    kafka = KafkaConnection(_settings(settings, unique_name))
    spec = RunSpec("arith", MODEL, "dead", chunks=2, limit=4, base_url=model_server.base_url)
    for index in (0, 1):  # the first chunk: every pair answered 500, the chunk fails
        model_server.override(f"arith-{index:04d}", 0, Behavior(status=500))
    assert submit_chunks(kafka, plan_chunks(spec)) == 2
    report = serve_until(kafka, settled=2)
    assert (report.chunks_run, report.dead_lettered) == (1, 1)
    run_key = RunKey("dead", "arith", MODEL)
    records = stored_records(kafka.settings, run_key)
    assert len(records) == 4  # its degraded outcomes are durable: a record for every pair
    progress = WorkProgress.read(kafka, run_key, records, kafka.settings.work_group)
    assert progress is not None
    assert [chunk.state for chunk in progress.chunks] == ["failed", "done"]
    assert progress.as_json()["failed"] == 1


def test_a_chunk_the_budget_stopped_before_a_degraded_pair_is_not_done(
    settings: Settings, model_server: ModelServer, unique_name: str
) -> None:
    kafka = KafkaConnection(_settings(settings, unique_name))
    run_key = RunKey("retry", "arith", MODEL)
    spec = RunSpec("arith", MODEL, "retry", chunks=1, limit=4, base_url=model_server.base_url)
    model_server.override("arith-0002", 0, Behavior(status=500))  # degraded, retried later
    assert submit_chunks(kafka, plan_chunks(spec)) == 1
    assert serve_until(kafka, settled=1).chunks_run == 1

    def states() -> list[str]:
        records = stored_records(kafka.settings, run_key)
        progress = WorkProgress.read(kafka, run_key, records, kafka.settings.work_group)
        assert progress is not None and len(records) == 4
        return [chunk.state for chunk in progress.chunks]

    assert states() == ["done"]  # ran to its end: its degraded outcome is its own
    # Submitted again with nothing left to spend: the degraded pair is not retried.
    assert submit_chunks(kafka, plan_chunks(dataclasses.replace(spec, budget_usd=0.0))) == 1
    assert serve_until(kafka, settled=2).budget_stopped == 1
    assert states() == ["stopped"]


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
