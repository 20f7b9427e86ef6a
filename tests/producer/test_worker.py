"""The worker in-process: dead letters for poison and failing tasks, and it goes on serving."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer

from resultlog.kafka import KafkaConnection
from resultlog.producer.datasets import arith
from resultlog.producer.offline import Behavior, ModelServer
from resultlog.producer.worker import (
    CHUNK_FAILED,
    ChunkWorker,
    RunSpec,
    WorkerOptions,
    plan_chunks,
    submit_chunks,
)
from resultlog.producer.worker._chunk import ChunkRunner
from resultlog.schemas import ChunkTask, RunKey
from resultlog.settings import Settings
from tests.support.kafka import read_topic, stored_records
from tests.support.waiting import wait_for
from tests.support.work import committed_tasks, serve_until

MODEL = "offline/gpt-4o"


def _tasks(run_id: str, base_url: str, **fields: Any) -> list[ChunkTask]:
    spec = RunSpec("arith", MODEL, run_id, chunks=1, limit=4, base_url=base_url)
    return [task.model_copy(update=fields) for task in plan_chunks(spec)]


def _dead_letters(settings: Settings, expected: int) -> list[dict[str, str]]:
    """The headers of the work dead-letter topic's messages, once `expected` are there."""

    def arrived() -> list[dict[str, str]] | None:
        letters = read_topic(settings, settings.work_dlq_topic)
        return [letter.headers for letter in letters] if len(letters) >= expected else None

    return wait_for(arrived, f"{expected} dead tasks")


def test_a_drained_chunk_writes_its_pairs_in_flight_and_the_next_attempt_asks_the_rest(
    settings: Settings, model_server: ModelServer
) -> None:
    # What a worker does when its chunk's partition is revoked or lost, or it is stopped.
    (task,) = plan_chunks(RunSpec("arith", MODEL, "drained", 1, 2, 8, None, model_server.base_url))
    for sample in arith().samples()[:8]:
        for epoch in range(2):
            model_server.override(sample.id, epoch, Behavior(delay_s=0.3))
    run_key = RunKey("drained", "arith", MODEL)
    runner = ChunkRunner(KafkaConnection(settings), concurrency=2)
    try:
        first = runner.start(task)
        wait_for(lambda: stored_records(settings, run_key), "the chunk's first durable pair")
        assert first.drain(30) and not first.cancelled
        assert first.result is not None and 0 < first.result.evaluated < 16
        drained = len(stored_records(settings, run_key))
        assert drained == first.result.evaluated  # every pair it asked for is durable
        second = runner.start(task)
        assert second.wait(60) and second.result is not None
        assert second.result.evaluated == 16 - drained
    finally:
        runner.close()
    assert model_server.request_counts() == {
        (sample.id, epoch): 1 for sample in arith().samples()[:8] for epoch in range(2)
    }
    assert len(stored_records(settings, run_key)) == 16


def test_poison_and_failing_tasks_are_dead_lettered_and_the_worker_goes_on(
    settings: Settings, model_server: ModelServer, unique_name: str
) -> None:
    settings = settings.model_copy(
        update={
            "work_group": f"{unique_name}.workers",
            "work_max_attempts": 2,
            "work_retry_backoff_s": 0.01,
            "model_max_retries": 0,
        }
    )
    kafka = KafkaConnection(settings)
    url = model_server.base_url
    model_server.override("arith-0000", 0, Behavior(status=401))  # fatal: fails the chunk
    poison = Producer(settings.client_config())
    poison.produce(settings.work_topic, key=b"x/y/z/0", value=b"not a task", partition=0)
    assert poison.flush(10) == 0
    refused = _tasks("refused", url, dataset_sha256="0" * 64)  # not this worker's dataset
    unauthorized = _tasks("unauthorized", url)
    with ModelServer(latency_s=0.001) as other:
        good = _tasks("good", other.base_url)
        assert submit_chunks(kafka, [*refused, *unauthorized, *good]) == 3
        report = serve_until(kafka, settled=4)

    assert (report.chunks_run, report.dead_lettered, report.undecodable) == (1, 2, 1)
    assert report.abandoned == 0
    assert report.chunk_ids == ["good/chunk-0-of-1"]
    letters = {letter["resultlog.reason.kind"]: letter for letter in _dead_letters(settings, 3)}
    assert set(letters) == {"undecodable_value", CHUNK_FAILED}
    assert letters["undecodable_value"]["resultlog.attempts"] == "0"
    reasons = [
        letter["resultlog.reason"]
        for letter in _dead_letters(settings, 3)
        if letter["resultlog.reason.kind"] == CHUNK_FAILED
    ]
    assert len(reasons) == 2
    assert any("refusing the task" in reason and "(x2)" in reason for reason in reasons)
    assert any("HTTP 401" in reason and "(x2)" in reason for reason in reasons)
    assert model_server.request_count("arith-0000", 0) == 2  # once per attempt
    assert committed_tasks(kafka) == 4  # every task, poison included, is settled


def test_an_unreachable_work_topic_is_a_clear_error(settings: Settings) -> None:
    missing = settings.model_copy(update={"work_topic": f"{settings.work_topic}.missing"})
    worker = ChunkWorker(KafkaConnection(missing), WorkerOptions("g"))
    try:
        worker.run()
    except Exception as exc:
        assert "does not exist; run `resultlog topics create`" in str(exc)
        assert not isinstance(exc, KafkaError)
    else:
        raise AssertionError("a worker without a work topic must not start")


def test_a_partition_paused_before_it_moved_away_is_served_when_it_comes_back(
    kafka: KafkaConnection, unique_name: str
) -> None:
    # librdkafka keeps a pause across revoke and re-assign: a worker holding a task (its
    # partition paused) that loses and regains the partition must read it again.
    worker = ChunkWorker(kafka, WorkerOptions(f"{unique_name}.workers"))
    topic, config = (
        kafka.work_topic,
        {
            **kafka.settings.client_config(),
            "group.id": f"{unique_name}.workers",
            "partition.assignment.strategy": "cooperative-sticky",
            "auto.offset.reset": "earliest",
        },
    )
    mine = Consumer(config)
    mine.subscribe([topic], on_assign=worker._assigned, on_revoke=worker._revoked)
    _poll_until(lambda: len(mine.assignment()) == kafka.settings.work_partitions, [mine])
    mine.pause(mine.assignment())  # as if a task were held on every partition

    other = Consumer(config)
    other.subscribe([topic])
    _poll_until(lambda: bool(other.assignment()), [mine, other])
    moved = {tp.partition for tp in other.assignment()}
    other.close()
    _poll_until(lambda: len(mine.assignment()) == kafka.settings.work_partitions, [mine])

    producer = Producer(kafka.settings.client_config())
    for partition in range(kafka.settings.work_partitions):
        producer.produce(topic, value=b"task", partition=partition)
    assert producer.flush(10) == 0
    seen: set[int] = set()

    def collect() -> bool:
        message = mine.poll(0.1)
        if message is not None and message.error() is None:
            seen.add(message.partition() or 0)
        return seen == moved

    _poll_until(collect, [])
    mine.close()
    assert seen == moved  # the ones that stayed are still paused, as the worker left them


def _poll_until(done: Callable[[], bool], consumers: list[Consumer]) -> None:
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for consumer in consumers:
            consumer.poll(0.05)
