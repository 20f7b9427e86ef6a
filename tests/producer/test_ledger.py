"""The bill (design rule 11): attempts and spent_cost carried forward across runs of a key, with
a real broker and the offline model server over HTTP."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from resultlog.consumers import fold_records
from resultlog.producer import ModelClient, Sample, StaticBenchmark, arith
from resultlog.producer.datasets import Scored
from resultlog.producer.offline import Behavior, ModelServer
from resultlog.producer.store import KafkaResultStore
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.kafka import stored_records
from tests.support.runs import MODEL, run_with


@dataclass(frozen=True)
class FlakyScorer(StaticBenchmark):
    """Arithmetic whose scorer raises for the samples in `failing` (while it holds them)."""

    failing: set[str] = field(default_factory=set)

    def score(self, sample: Sample, completion_text: str) -> Scored:
        """Raise for a failing sample, else score as the benchmark does."""
        if sample.id in self.failing:
            raise RuntimeError("scorer crashed")
        return super().score(sample, completion_text)


async def test_a_key_degraded_then_completed_keeps_every_attempt_and_its_cost(
    settings: Settings,
    kafka_store: KafkaResultStore,
    model_client: ModelClient,
    model_server: ModelServer,
) -> None:
    bench = FlakyScorer("ledger", arith().items[:4], arith().scorer, failing={"arith-0000"})
    run_key = RunKey("bill", "ledger", MODEL)
    five_hundred, ok = Behavior(status=500), Behavior()
    # Sample 1 fails both attempts of the first run (the client retries once), then answers.
    model_server.override("arith-0001", 0, five_hundred, five_hundred, ok)

    first = await run_with(bench, model_client, kafka_store, "bill", degrade_solver_errors=True)
    by_sample = {r.sample_index: r for r in stored_records(settings, run_key)}
    scorer_failed, server_failed = by_sample[0], by_sample[1]
    assert scorer_failed.degraded and scorer_failed.usage is None
    assert scorer_failed.attempts == 1 and scorer_failed.spent_cost is not None
    assert scorer_failed.spent_cost > 0  # the model answered (and was paid) before the scorer
    assert server_failed.degraded and (server_failed.attempts, server_failed.spent_cost) == (2, 0)
    assert first.summary.spent_cost > first.summary.usage.total_cost
    assert math.isclose(first.spent, first.summary.spent_cost)
    assert first.saved == 0.0

    bench.failing.clear()
    second = await run_with(bench, model_client, kafka_store, "bill", degrade_solver_errors=True)
    stored = stored_records(settings, run_key)
    latest = {r.sample_index: r for r in stored}
    assert not any(record.degraded for record in latest.values())
    cost = latest[0].usage.total_cost if latest[0].usage else 0.0
    assert cost > 0 and latest[0].attempts == 2
    assert latest[0].spent_cost == scorer_failed.spent_cost + cost  # both answers paid for
    assert latest[1].attempts == 3  # two failed attempts, then one answer
    assert latest[1].spent_cost == (latest[1].usage.total_cost if latest[1].usage else None)
    assert (latest[2].attempts, latest[3].attempts) == (1, 1)  # durable: not asked again

    summary = fold_records(stored)
    assert second.summary == summary
    assert summary.spent_cost == math.fsum(r.spent_cost or 0.0 for r in latest.values())
    assert math.isclose(summary.spent_cost - summary.usage.total_cost, scorer_failed.spent_cost)
    assert (second.evaluated, second.skipped) == (2, 2)
    kept = [latest[2].usage, latest[3].usage]
    assert second.saved == math.fsum(usage.total_cost for usage in kept if usage is not None)
    assert math.isclose(second.spent, cost + latest[1].spent)
