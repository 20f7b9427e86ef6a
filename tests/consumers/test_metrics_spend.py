"""The aggregator's /metrics exports each run's spend (every attempt, as its summary's
spent_cost), labelled by the run key's parts, over real HTTP from a real broker."""

from __future__ import annotations

from resultlog.consumers import fold_records
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.kafka import write
from tests.support.ledger import spent_in_metrics
from tests.support.records import make_record
from tests.support.waiting import wait_for

CHEAP = RunKey("metrics-1", "arith", "openai/gpt-4o")
DEAR = RunKey("metrics-2", "my bench", 'model "quoted"')


def _records(run_key: RunKey, spent: float) -> list[SampleResult]:
    """Two completed records and a degraded one whose attempts cost something."""
    return [
        make_record(0, 0, run_key=run_key, cost=0.01, spent_cost=0.01 + spent),
        make_record(1, 0, run_key=run_key, cost=0.02, spent_cost=0.02),
        make_record(2, 0, run_key=run_key, degraded=True, spent_cost=spent),
    ]


def test_metrics_export_each_runs_spend(settings: Settings, base_url: str) -> None:
    cheap, dear = _records(CHEAP, 0.005), _records(DEAR, 0.25)
    write(settings, [*cheap, *dear])
    want = {CHEAP: fold_records(cheap).spent_cost, DEAR: fold_records(dear).spent_cost}
    assert want[DEAR] > fold_records(dear).usage.total_cost  # superseded attempts count

    wait_for(lambda: spent_in_metrics(base_url) == want or None, "the spend in /metrics")

    # A key re-run at a cost: the gauge follows the run's latest records.
    rerun = make_record(2, 0, run_key=CHEAP, cost=0.03, spent_cost=0.035)
    write(settings, [rerun])
    want[CHEAP] = fold_records([*cheap[:2], rerun]).spent_cost
    wait_for(lambda: spent_in_metrics(base_url) == want or None, "the new spend in /metrics")
