"""Records sized by what the topic accepts, kept reduced rather than lost."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from resultlog.kafka import KafkaConnection
from resultlog.producer import NoopResultStore, Sample, StaticBenchmark, arith, run_benchmark
from resultlog.producer._fit import reduce_to
from resultlog.producer._records import INPUT_REF
from resultlog.producer.errors import PersistenceError
from resultlog.producer.runner import RunResult
from resultlog.producer.store import KafkaResultStore, ResultStore
from resultlog.schemas import Codec, RunKey
from resultlog.settings import Settings
from resultlog.topics import ensure_topics, topic_config, topic_specs
from tests.support.records import make_record
from tests.support.scripted import ScriptedModel, partition_log
from tests.support.waiting import wait_for

MODEL = "scripted/m"
MIB = 1024 * 1024


def noise(size: int) -> str:
    """Text that does not compress much (base64 of random bytes)."""
    return base64.b64encode(os.urandom(size * 3 // 4)).decode()[:size]


def one_sample(prompt: str) -> StaticBenchmark:
    return StaticBenchmark("long", (Sample("long-0", prompt, "42"),), arith().scorer, "Be brief.")


async def run(store: ResultStore, run_id: str, prompt: str, model: ScriptedModel) -> RunResult:
    return await run_benchmark(
        one_sample(prompt), MODEL, run_id=run_id, solver=model.solver, store=store
    )


async def test_the_input_is_stored_once() -> None:
    result = await run(NoopResultStore(), "once", "What is 6 * 7?", ScriptedModel())
    [record] = result.records
    system, user, assistant = record.messages
    assert record.input == "What is 6 * 7?"
    assert (user.role, user.content, user.content_parts) == ("user", None, INPUT_REF)
    assert (system.content, assistant.content) == ("Be brief.", "42")


async def test_a_20_mb_prompt_is_stored_reduced_and_never_asked_again(settings: Settings) -> None:
    prompt = noise(20 * 1000 * 1000)
    store = KafkaResultStore(KafkaConnection(settings))
    try:
        first = await run(store, "huge", prompt, ScriptedModel())
        again = ScriptedModel()
        resumed = await run(store, "huge", prompt, again)
    finally:
        await store.close()

    [(_, stored, value)] = partition_log(settings, RunKey("huge", "long", MODEL))
    assert not stored.degraded and len(value) <= settings.max_message_bytes
    cut = json.loads(stored.truncated or "{}")
    assert set(cut) == {"input"}
    assert cut["input"]["length"] == len(prompt)
    assert cut["input"]["sha256"] == hashlib.sha256(prompt.encode()).hexdigest()
    assert stored.input == prompt[: cut["input"]["kept"]] and len(stored.input) > MIB
    assert first.summary.records == 1 and first.summary.correct_answers == 1
    assert not again.calls and resumed.skipped == 1


async def test_records_are_sized_against_the_topics_own_limit(settings: Settings) -> None:
    name = f"t{uuid.uuid4().hex[:12]}"
    small = settings.model_copy(update={"results_topic": f"{name}.results"})
    ensure_topics(KafkaConnection(small), topic_specs(small, {"max.message.bytes": str(MIB)}))
    store = KafkaResultStore(KafkaConnection(small))
    compressible, incompressible = "7 + 8 = ? " * 200_000, noise(2 * MIB)
    try:
        assert store.limits.topic_bytes == MIB
        await run(store, "text", compressible, ScriptedModel())
        await run(store, "noise", incompressible, ScriptedModel())
    finally:
        await store.close()
    [(_, kept, _)] = partition_log(small, RunKey("text", "long", MODEL))
    assert kept.input == compressible and kept.truncated is None  # 2 MB raw, a few kB zstd
    [(_, reduced, value)] = partition_log(small, RunKey("noise", "long", MODEL))
    assert len(value) < MIB and json.loads(reduced.truncated or "{}")["input"]["kept"] < MIB


def test_cut_json_fields_stay_json_and_every_cut_is_accounted() -> None:
    record = make_record(
        0,
        0,
        input="q" * 5000,
        metadata=json.dumps({"notes": "n" * 8000}),
        target="t" * 3000,
    )
    codec = Codec()
    reduced, value = reduce_to(record, codec.encode_sample_result, 4000)
    cut = json.loads(reduced.truncated or "{}")
    assert len(value) <= 4000
    assert set(cut) >= {"metadata", "input"}
    assert isinstance(json.loads(reduced.metadata or "null"), str)
    for field, original in (("metadata", record.metadata), ("input", record.input)):
        assert cut[field]["sha256"] == hashlib.sha256((original or "").encode()).hexdigest()
    with pytest.raises(PersistenceError, match="does not fit in 100 bytes"):
        reduce_to(record, codec.encode_sample_result, 100)


async def test_a_record_the_broker_still_refuses_is_reduced_again(settings: Settings) -> None:
    store = KafkaResultStore(KafkaConnection(settings))  # reads the topic's 8 MiB limit
    lowered = ConfigResource(
        ConfigResource.Type.TOPIC,
        settings.results_topic,
        incremental_configs=[
            ConfigEntry("max.message.bytes", str(MIB), incremental_operation=AlterConfigOpType.SET)
        ],
    )  # an operator lowers the limit while the worker runs
    admin = AdminClient(settings.client_config())
    admin.incremental_alter_configs([lowered])[lowered].result(30)
    kafka = KafkaConnection(settings)

    def lowered_limit() -> bool:
        return topic_config(kafka, settings.results_topic)["max.message.bytes"] == str(MIB)

    wait_for(lowered_limit, "the lowered limit")
    time.sleep(1)  # the broker applies a topic's new configuration shortly after it is stored
    try:
        await run(store, "lowered", noise(3 * MIB), ScriptedModel())
    finally:
        await store.close()
    [(_, reduced, value)] = partition_log(settings, RunKey("lowered", "long", MODEL))
    assert len(value) < MIB and json.loads(reduced.truncated or "{}")["input"]["length"] == 3 * MIB
