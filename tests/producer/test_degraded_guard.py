"""Degraded writes never shadow a completed record, whoever wrote it (design rule 3).

Another writer's success is injected at the exact moments that matter: before the degraded
phase reads the log, and between that read and the degraded write (the race a re-read alone
cannot close, which the check after the write repairs).
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping

from resultlog.consumers import KeyHistory
from resultlog.kafka import KafkaConnection
from resultlog.producer import StaticBenchmark, arith, run_benchmark
from resultlog.producer.runner import RunOptions, RunResult, WritePolicy
from resultlog.producer.store import KafkaResultStore
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.records import make_record
from tests.support.scripted import ScriptedModel, latest, partition_log

SAMPLES = 6
EPOCHS = 2
MODEL = "scripted/m"
FAST = WritePolicy(initial_delay_s=0.01, rng=random.Random(3))
FAILING = {(3, 0), (4, 1), (5, 0)}


def bench() -> StaticBenchmark:
    full = arith()
    return StaticBenchmark("arith", full.items[:SAMPLES], full.scorer)


def other_writers_success(run_id: str, sample_index: int, epoch: int) -> SampleResult:
    """What a concurrent healthy writer of the run key made durable for the pair."""
    return make_record(
        sample_index,
        epoch,
        run_key=RunKey(run_id, "arith", MODEL),
        epochs=EPOCHS,
        dataset_size=SAMPLES,
        sample_id=bench().items[sample_index].id,
    )


async def run(store: KafkaResultStore, run_id: str, model: ScriptedModel) -> RunResult:
    """Run the benchmark with the store, then close it."""
    try:
        return await run_benchmark(
            bench(),
            MODEL,
            run_id=run_id,
            solver=model.solver,
            store=store,
            options=RunOptions(epochs=EPOCHS, write_policy=FAST),
        )
    finally:
        await store.close()


def failing_model() -> ScriptedModel:
    items = bench().items
    return ScriptedModel((items[index].id, epoch) for index, epoch in FAILING)


class InterleavingStore(KafkaResultStore):
    """The real store, with another writer's completed record landing around the first read."""

    def __init__(self, kafka: KafkaConnection, success: SampleResult, *, after_read: bool) -> None:
        super().__init__(kafka)
        self.success = success
        self.after_read = after_read
        self.reads = 0

    async def histories(
        self, run_key: RunKey, pairs: Collection[tuple[int, int]]
    ) -> Mapping[tuple[int, int], KeyHistory]:
        self.reads += 1
        if self.reads == 1 and not self.after_read:
            await self.write(self.success)
        found = await super().histories(run_key, pairs)
        if self.reads == 1 and self.after_read:
            await self.write(self.success)  # lands after our read, before our degraded write
        return found


async def test_a_success_written_between_the_read_and_the_degraded_write_is_restored(
    settings: Settings,
) -> None:
    success = other_writers_success("race", 4, 1)
    store = InterleavingStore(KafkaConnection(settings), success, after_read=True)
    result = await run(store, "race", failing_model())

    log = partition_log(settings, RunKey("race", "arith", MODEL))
    statuses = [r.degraded for _, r, _ in log if (r.sample_index, r.epoch) == (4, 1)]
    assert statuses == [False, True, False], "the success, our degraded write, the success again"
    values = [v for _, r, v in log if (r.sample_index, r.epoch) == (4, 1) and not r.degraded]
    assert values[0] == values[1], "restored byte for byte"
    now = latest(settings, RunKey("race", "arith", MODEL))
    assert now[(4, 1)] == success
    assert {pair for pair, r in now.items() if r.degraded} == FAILING - {(4, 1)}
    assert result.degraded == 2 and result.summary.degraded_records == 2

    again = failing_model()
    await run(KafkaResultStore(KafkaConnection(settings)), "race", again)
    items = bench().items
    assert set(again.calls) == {(items[i].id, e) for i, e in FAILING - {(4, 1)}}


async def test_a_success_already_durable_is_not_written_over(settings: Settings) -> None:
    success = other_writers_success("before", 3, 0)
    store = InterleavingStore(KafkaConnection(settings), success, after_read=False)
    result = await run(store, "before", failing_model())
    log = partition_log(settings, RunKey("before", "arith", MODEL))
    assert [r.degraded for _, r, _ in log if (r.sample_index, r.epoch) == (3, 0)] == [False]
    assert result.degraded == 2
    assert success in result.records


async def test_a_success_shadowed_by_an_older_writer_is_restored(settings: Settings) -> None:
    run_key = RunKey("shadowed", "arith", MODEL)
    store = KafkaResultStore(KafkaConnection(settings))
    success = other_writers_success("shadowed", 5, 0)
    shadow = make_record(
        5, 0, "S", run_key=run_key, epochs=EPOCHS, dataset_size=SAMPLES, degraded=True,
        sample_id=success.sample_id, created_offset_ms=1,
    )  # fmt: skip
    await store.write(success)
    await store.write(shadow)  # a writer without the check shadowed it
    await run(store, "shadowed", failing_model())
    now = latest(settings, run_key)
    assert now[(5, 0)] == success
    assert {pair for pair, r in now.items() if r.degraded} == FAILING - {(5, 0)}
