"""The runner against a real broker and the offline model server: the original resume tests."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import pytest

from resultlog.consumers import LoadedViews, RunRecords, fold_records, read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.producer._scorers import Scored
from resultlog.producer.datasets import Benchmark, Sample, StaticBenchmark, arith, limit_samples
from resultlog.producer.errors import PersistenceError, SolverError
from resultlog.producer.model_client import Completion, ModelClient
from resultlog.producer.offline import Behavior, ModelServer
from resultlog.producer.runner import Progress, RunOptions, RunResult, run_benchmark
from resultlog.producer.store import KafkaResultStore, NoopResultStore
from resultlog.schemas import RunKey, SampleResult, ScoreValue, encode_key
from resultlog.settings import Settings
from tests.support.kafka import produce_raw, run_partition, stored_records
from tests.support.records import make_record
from tests.support.runs import MODEL, run_with


def comparable(result: RunResult) -> dict[str, object]:
    """A summary without its run id and wall-clock time, to compare two separate runs."""
    return result.summary.model_dump(exclude={"run_id", "as_of", "generation_time_ms"})


async def test_one_record_per_pair_with_usage_and_generation_time(
    settings: Settings, kafka_store: KafkaResultStore, model_client: ModelClient
) -> None:
    result = await run_with(limit_samples(arith(), 5), model_client, kafka_store, "r1", epochs=2)
    run_key = RunKey("r1", "arith", MODEL)
    stored = stored_records(settings, run_key)
    assert Counter((r.sample_index, r.epoch) for r in stored) == {
        (i, e): 1 for i in range(5) for e in range(2)
    }
    for record in stored:
        if not record.degraded:
            assert record.usage is not None and record.usage.total_tokens > 0
            assert record.generation_time_ms is not None
    assert result.summary == fold_records(stored)
    assert result.summary.records == 10


async def test_stored_pairs_are_skipped_and_the_aggregate_equals_a_fresh_run(
    kafka_store: KafkaResultStore, model_client: ModelClient, model_server: ModelServer
) -> None:
    fresh = await run_with(
        limit_samples(arith(), 12), model_client, NoopResultStore(), "fresh", epochs=3
    )
    partial = await run_with(
        limit_samples(arith(), 12), model_client, kafka_store, "r2", epochs=3, sample_range=(0, 6)
    )
    before = model_server.request_counts()

    resumed = await run_with(limit_samples(arith(), 12), model_client, kafka_store, "r2", epochs=3)

    durable = {(r.sample_id, r.epoch) for r in partial.records if not r.degraded}
    requested_again = {
        pair for pair, n in model_server.request_counts().items() if n > before[pair]
    }
    assert durable and not durable & requested_again
    assert resumed.skipped == len(durable)
    assert comparable(resumed) == comparable(fresh)


async def test_absolute_indexes_with_a_range(
    settings: Settings, kafka_store: KafkaResultStore, model_client: ModelClient
) -> None:
    result = await run_with(
        limit_samples(arith(), 12), model_client, kafka_store, "r3", sample_range=(4, 8)
    )
    assert sorted(r.sample_index for r in result.records) == [4, 5, 6, 7]
    assert {r.sample_id for r in result.records} == {f"arith-{i:04d}" for i in range(4, 8)}
    assert all(r.dataset_size == 12 for r in result.records)
    stored = stored_records(settings, RunKey("r3", "arith", MODEL))
    assert sorted(r.sample_index for r in stored) == [4, 5, 6, 7]


async def test_a_range_starting_after_0_skips_its_stored_record(
    kafka_store: KafkaResultStore, model_client: ModelClient, model_server: ModelServer
) -> None:
    bench = limit_samples(arith(), 12)
    first = await run_with(bench, model_client, kafka_store, "r3b", sample_range=(5, 6), epochs=2)
    assert [(r.sample_index, r.epoch) for r in first.records] == [(5, 0), (5, 1)]
    before = model_server.request_counts()

    result = await run_with(bench, model_client, kafka_store, "r3b", sample_range=(4, 8), epochs=2)

    stored = {(5, 0), (5, 1)} - {(r.sample_index, r.epoch) for r in first.records if r.degraded}
    assert result.skipped == len(stored) and result.evaluated == 8 - len(stored)
    for index, epoch in stored:
        pair = (bench.samples()[index].id, epoch)
        assert model_server.request_counts()[pair] == before[pair], "a stored pair was asked"
    assert sorted((r.sample_index, r.epoch) for r in result.records) == [
        (i, e) for i in range(4, 8) for e in range(2)
    ]
    assert result.summary.records == 8  # the run: samples 4-7, sample 5 from the first run


async def test_duplicate_records_from_a_store_seed_once(model_client: ModelClient) -> None:
    bench = limit_samples(arith(), 2)
    durable = await run_with(bench, model_client, NoopResultStore(), "r-dup")

    class RepeatingStore(NoopResultStore):
        async def load(self, run_key: RunKey) -> RunRecords:
            return RunRecords([*durable.records, *durable.records], 0)  # repeats every key

    result = await run_with(bench, model_client, RepeatingStore(), "r-dup")
    completed = sum(not r.degraded for r in durable.records)
    assert result.skipped == completed
    assert result.summary.records == 2


async def test_a_stored_epoch_outside_the_range_is_ignored(
    settings: Settings,
    kafka_store: KafkaResultStore,
    model_client: ModelClient,
    model_server: ModelServer,
) -> None:
    first = await run_with(limit_samples(arith(), 3), model_client, kafka_store, "r4", epochs=3)
    degraded_before = {(r.sample_id, r.epoch) for r in first.records if r.degraded}
    before = model_server.request_counts()

    result = await run_with(limit_samples(arith(), 3), model_client, kafka_store, "r4", epochs=2)

    # The worker reports the run's summary, replay's (design rule 8): the newest record
    # gives the shape, and the epoch-2 records are either in it or counted out of it.
    assert result.summary == fold_records(stored_records(settings, RunKey("r4", "arith", MODEL)))
    assert result.summary.records + result.summary.out_of_shape == 9
    assert sorted({r.epoch for r in result.records}) == [0, 1]
    requested_again = {p for p, n in model_server.request_counts().items() if n > before[p]}
    assert requested_again <= degraded_before


async def test_429s_give_degraded_skipped_outcomes_written_after_all_others(
    settings: Settings,
    kafka_store: KafkaResultStore,
    model_client: ModelClient,
    model_server: ModelServer,
) -> None:
    bench = limit_samples(arith(), 6)
    model_server.override(bench.samples()[0].id, 0, Behavior(status=429))
    model_server.override(bench.samples()[3].id, 1, Behavior(status=500))
    result = await run_with(bench, model_client, kafka_store, "r5", epochs=2)
    degraded = {(r.sample_index, r.epoch) for r in result.records if r.degraded}
    assert {(0, 0), (3, 1)} <= degraded
    for record in result.records:
        if (record.sample_index, record.epoch) in {(0, 0), (3, 1)}:
            assert record.score.value is ScoreValue.S
            assert record.error is not None and record.error.http_status in (429, 500)
    stored = stored_records(settings, RunKey("r5", "arith", MODEL))
    flags = [r.degraded for r in stored]
    assert flags == sorted(flags), "a degraded record was written before a completed one"
    assert result.summary.degraded_records == len(degraded)


@pytest.mark.parametrize(("status", "index"), [(400, 1), (422, 0)])
async def test_a_400_or_a_422_gives_a_degraded_incorrect_outcome(
    status: int,
    index: int,
    kafka_store: KafkaResultStore,
    model_client: ModelClient,
    model_server: ModelServer,
) -> None:
    bench = limit_samples(arith(), 2)
    model_server.override(bench.samples()[index].id, 0, Behavior(status=status))
    result = await run_with(bench, model_client, kafka_store, f"r{status}")
    record = next(r for r in result.records if r.sample_index == index)
    assert record.degraded and record.score.value is ScoreValue.I
    assert record.error is not None and record.error.http_status == status


async def test_a_401_fails_the_run_and_writes_no_degraded_record(
    settings: Settings,
    kafka_store: KafkaResultStore,
    model_client: ModelClient,
    model_server: ModelServer,
) -> None:
    bench = limit_samples(arith(), 6)
    model_server.override(bench.samples()[0].id, 0, Behavior(status=429))
    model_server.override(bench.samples()[5].id, 0, Behavior(status=401))
    with pytest.raises(Exception, match="401"):
        await run_with(bench, model_client, kafka_store, "r401", max_concurrency=1)
    assert not any(r.degraded for r in stored_records(settings, RunKey("r401", "arith", MODEL)))


async def test_a_stored_degraded_record_is_re_run(
    kafka_store: KafkaResultStore, model_client: ModelClient, model_server: ModelServer
) -> None:
    bench = limit_samples(arith(), 3)
    model_server.override(bench.samples()[1].id, 0, Behavior(status=429))
    first = await run_with(bench, model_client, kafka_store, "r6")
    assert first.summary.degraded_records == 1
    model_server.clear_overrides()
    before = model_server.request_count(bench.samples()[1].id, 0)

    second = await run_with(bench, model_client, kafka_store, "r6")

    assert model_server.request_count(bench.samples()[1].id, 0) == before + 1
    assert second.skipped == 2 and second.evaluated == 1
    assert second.summary.degraded_records == 0


async def test_scorer_errors_are_classified_like_solver_errors(
    kafka_store: KafkaResultStore, model_client: ModelClient
) -> None:
    def raising(target: str | None, text: str) -> Scored:
        raise ValueError("scorer could not parse")

    full = arith()
    bench = StaticBenchmark("arith", full.items[:2], raising, full.system_prompt)
    with pytest.raises(SolverError, match="scorer failed on arith-0000 epoch 0"):
        await run_with(bench, model_client, kafka_store, "r-scorer", max_concurrency=1)
    result = await run_with(
        bench, model_client, kafka_store, "r-scorer", degrade_solver_errors=True
    )
    assert all(r.degraded and r.score.value is ScoreValue.S for r in result.records)
    assert {r.error.kind for r in result.records if r.error} == {"scorer_error"}


async def test_every_model_call_of_a_sample_is_listed_once_in_call_order(
    kafka_store: KafkaResultStore, model_client: ModelClient, model_server: ModelServer
) -> None:
    bench = limit_samples(arith(), 1)
    sample_id = bench.samples()[0].id
    model_server.override(
        sample_id,
        0,
        Behavior(generation_id="gen-b"),
        Behavior(generation_id="gen-a"),
        Behavior(generation_id="gen-b"),
    )

    async def three_turns(benchmark: Benchmark, sample: Sample) -> Completion:
        messages = benchmark.messages(sample)
        for _ in range(2):
            await model_client.complete(messages, model=MODEL)
        return await model_client.complete(messages, model=MODEL)

    result = await run_benchmark(
        bench, MODEL, run_id="r-ids", solver=three_turns, store=kafka_store
    )
    assert result.records[0].generation_ids == ("gen-b", "gen-a")


async def test_generation_time_is_the_final_attempt_s(
    kafka_store: KafkaResultStore, model_server: ModelServer
) -> None:
    bench = limit_samples(arith(), 1)
    model_server.override(bench.samples()[0].id, 0, Behavior(status=500), Behavior(delay_s=0.05))
    async with ModelClient(model_server.base_url, max_retries=1, backoff_initial=1.0) as client:
        started = time.perf_counter()
        result = await run_with(bench, client, kafka_store, "r-time")
        wall_ms = (time.perf_counter() - started) * 1000
    (record,) = result.records
    assert not record.degraded and record.generation_time_ms is not None
    assert wall_ms >= 500  # the backoff after the 500 (>= half of 1 s, with jitter)
    assert 50 <= record.generation_time_ms < 400  # the final attempt alone


async def test_reasoning_details_citations_response_items_and_trajectory_are_kept(
    kafka_store: KafkaResultStore, model_client: ModelClient, model_server: ModelServer
) -> None:
    bench = limit_samples(arith(), 1)
    annotations = [{"type": "url_citation", "url_citation": {"url": "https://example.org"}}]
    model_server.override(
        bench.samples()[0].id,
        0,
        Behavior(reasoning="add them", message_extra={"annotations": annotations}),
    )
    (record,) = (await run_with(bench, model_client, kafka_store, "r-rich")).records
    assistant = record.messages[-1]
    assert json.loads(assistant.reasoning_details or "") == [
        {"type": "reasoning.text", "text": "add them"}
    ]
    assert json.loads(assistant.citations or "") == annotations
    items = json.loads(record.response_items or "")
    assert items[0]["message"]["content"] == assistant.content
    steps = json.loads(record.score.trajectory or "")
    assert steps[-1]["step"] == "compare" and steps[-1]["equal"] is True


async def test_solver_errors_degrade_only_when_asked(kafka_store: KafkaResultStore) -> None:
    async def broken(benchmark: Benchmark, sample: Sample) -> Completion:
        raise RuntimeError(f"tool crashed on {sample.id}")

    bench = limit_samples(arith(), 2)
    with pytest.raises(SolverError, match="tool crashed"):
        await run_benchmark(bench, MODEL, run_id="r7", solver=broken, store=kafka_store)
    result = await run_benchmark(
        bench,
        MODEL,
        run_id="r7",
        solver=broken,
        store=kafka_store,
        options=RunOptions(degrade_solver_errors=True),
    )
    assert all(r.degraded and r.score.value is ScoreValue.S for r in result.records)
    assert result.summary.skipped_questions == 2


async def test_a_slow_sample_does_not_block_other_writes(
    settings: Settings,
    kafka_store: KafkaResultStore,
    model_client: ModelClient,
    model_server: ModelServer,
) -> None:
    bench = limit_samples(arith(), 8)
    model_server.override(bench.samples()[0].id, 0, Behavior(delay_s=1.5))
    await run_with(bench, model_client, kafka_store, "r8", max_concurrency=4)
    stored = [r for r in stored_records(settings, RunKey("r8", "arith", MODEL)) if not r.degraded]
    assert stored[-1].sample_index == 0, "the slow first sample should be written last"
    assert len(stored) >= 7


async def test_a_drained_run_finishes_its_pairs_in_flight_and_starts_no_more(
    settings: Settings,
    kafka_store: KafkaResultStore,
    model_client: ModelClient,
    model_server: ModelServer,
) -> None:
    bench = limit_samples(arith(), 8)
    for sample in bench.samples():
        model_server.override(sample.id, 0, Behavior(delay_s=0.2))
    draining = asyncio.Event()

    def drain_after_the_first(progress: Progress) -> None:
        if progress.done:
            draining.set()

    result = await run_with(
        bench,
        model_client,
        kafka_store,
        "drained",
        max_concurrency=2,
        on_progress=drain_after_the_first,
        draining=draining,
    )
    stored = stored_records(settings, RunKey("drained", "arith", MODEL))
    # The pair beside the first was in flight when the drain came: answered, so written.
    assert sorted(r.sample_index for r in stored) == [0, 1]
    assert not any(r.degraded for r in stored)
    assert (result.evaluated, result.unstarted) == (2, 6)
    assert sorted(model_server.request_counts().values()) == [1, 1]


async def test_a_failing_resume_read_still_evaluates_everything(
    settings: Settings, model_client: ModelClient
) -> None:
    class UnreadableStore(KafkaResultStore):
        async def load(self, run_key: RunKey) -> RunRecords:
            raise PersistenceError("simulated unreadable log")

    store = UnreadableStore(KafkaConnection(settings))
    try:
        await run_with(limit_samples(arith(), 3), model_client, store, "r9")
        result = await run_with(limit_samples(arith(), 3), model_client, store, "r9")
    finally:
        await store.close()
    assert result.skipped == 0 and result.evaluated == 3


class FlakyStore:
    """The real Kafka store behind a switch that fails the first `failures` writes."""

    def __init__(self, inner: KafkaResultStore, failures: int) -> None:
        self.inner = inner
        self.failures = failures
        self.attempts = 0

    async def write(self, record: SampleResult) -> None:
        self.attempts += 1
        if self.attempts <= self.failures:
            raise PersistenceError(f"simulated failure {self.attempts}")
        await self.inner.write(record)

    async def load(self, run_key: RunKey) -> RunRecords | LoadedViews:
        return await self.inner.load(run_key)

    async def close(self) -> None:
        pass


async def test_a_write_that_fails_twice_then_succeeds(
    settings: Settings, kafka_store: KafkaResultStore, model_client: ModelClient
) -> None:
    flaky = FlakyStore(kafka_store, failures=2)
    result = await run_with(limit_samples(arith(), 1), model_client, flaky, "r10")
    assert flaky.attempts == 3
    assert [r.sample_index for r in stored_records(settings, RunKey("r10", "arith", MODEL))] == [0]
    assert result.summary.records == 1


async def test_a_write_that_always_fails_rejects_the_run_after_4_attempts(
    kafka_store: KafkaResultStore, model_client: ModelClient
) -> None:
    flaky = FlakyStore(kafka_store, failures=10**6)
    with pytest.raises(PersistenceError, match="after 4 attempt"):
        await run_with(limit_samples(arith(), 1), model_client, flaky, "r11")
    assert flaky.attempts == 4


async def test_a_record_larger_than_the_producer_accepts_is_stored_reduced(
    settings: Settings, model_client: ModelClient
) -> None:
    # A paid answer too large to store is kept reduced, never failed.
    store = KafkaResultStore(
        KafkaConnection(settings), producer_overrides={"message.max.bytes": 2000}
    )
    huge = StaticBenchmark(
        "huge", (Sample("big", "What is 1 + 1? " + "x" * 5000, "2"),), arith().scorer
    )
    try:
        result = await run_with(huge, model_client, store, "r12")
    finally:
        await store.close()
    [stored] = stored_records(settings, RunKey("r12", "huge", MODEL))
    assert result.summary.records == 1 and not stored.degraded
    assert json.loads(stored.truncated or "{}")["input"]["length"] == 5015


async def test_every_request_carries_its_own_x_bench(
    model_client: ModelClient, model_server: ModelServer
) -> None:
    bench = limit_samples(arith(), 10)
    await run_with(bench, model_client, NoopResultStore(), "r13", epochs=3, max_concurrency=8)
    stamps = [r.body["x_bench"] for r in model_server.requests]
    assert {(s["sample_id"], s["sample_epoch"]) for s in stamps} == {
        (sample.id, epoch) for sample in bench.samples() for epoch in range(3)
    }
    for request in model_server.requests:
        prompt = request.body["messages"][-1]["content"]
        sample = next(s for s in bench.samples() if s.id == request.sample_id)
        assert prompt == sample.input


async def test_resume_reads_only_the_run_keys_partition(
    settings: Settings, kafka_store: KafkaResultStore, model_client: ModelClient
) -> None:
    await run_with(limit_samples(arith(), 4), model_client, kafka_store, "mine")
    await run_with(limit_samples(arith(), 4), model_client, kafka_store, "other")
    records, undecodable, *_ = read_run_records(
        KafkaConnection(settings), RunKey("mine", "arith", MODEL)
    )
    assert undecodable == 0
    assert {r.run_id for r in records} == {"mine"}
    assert len(records) == 4


async def test_the_store_counts_undecodable_latest_values(
    settings: Settings, kafka_store: KafkaResultStore
) -> None:
    run_key = RunKey("half-readable", "arith", MODEL)
    await kafka_store.write(make_record(0, 0, run_key=run_key))
    await kafka_store.write(make_record(1, 0, run_key=run_key))
    garbage = (encode_key(run_key, 1, 0), b"\x00garbage", run_partition(settings, run_key))
    assert produce_raw(settings, [garbage]) == []
    loaded = await kafka_store.load(run_key)
    assert [(r.sample_index, r.epoch) for r in loaded.records] == [(0, 0)]
    assert loaded.undecodable == 1
    assert (await NoopResultStore().load(run_key)) == RunRecords([], 0)


async def test_structured_prompt_parts_are_kept_as_json_text(
    kafka_store: KafkaResultStore, model_client: ModelClient
) -> None:
    class Multimodal(StaticBenchmark):
        def messages(self, sample: Sample) -> list[dict[str, object]]:
            parts = [{"type": "text", "text": sample.input}]
            return [{"role": "user", "content": parts}]

    full = arith()
    bench = Multimodal("arith", full.items[:1], full.scorer)
    result = await run_with(bench, model_client, kafka_store, "parts")
    prompt = result.records[0].messages[0]
    assert prompt.content is None
    assert prompt.content_parts is not None and "What is" in prompt.content_parts
