"""Compaction really runs while runs are written and re-written; every reader's summary holds.

The topics get tiny segments (segment.ms), min.cleanable.dirty.ratio 0.01 and a short
delete.retention.ms; the launcher's broker cleans every second. Resume re-runs degraded pairs,
so their keys are superseded; the cleaner then drops the superseded values. Resume, replay
(one run and all runs) and the aggregator (one that watched, one rebuilt afterwards) must give
the same summaries before and after.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from resultlog.consumers import replay_all, replay_run
from resultlog.consumers.aggregator import Aggregator
from resultlog.kafka import KafkaConnection
from resultlog.producer import RunResult
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.offline import Behavior, ModelServer
from resultlog.schemas import RunKey, partition_for
from resultlog.settings import Settings
from tests.support.aggregator import held, serving_aggregator
from tests.support.audit import report
from tests.support.kafka import RawRecord, read_partition, run_partition, topic_settings, write
from tests.support.records import make_record
from tests.support.runindex import full_scan, read_one_run, wait_indexed
from tests.support.runs import MODEL, run_once
from tests.support.summaries import Summary, bare, expected
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

SAMPLES, EPOCHS = 30, 2
SEGMENT_MS = 200
COMPACTING = {
    "segment.ms": str(SEGMENT_MS),
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "100",
    "min.compaction.lag.ms": "0",
}


View = dict[RunKey, Summary | None]


def _views(settings: Settings, run_keys: list[RunKey], aggregators: list[Aggregator]) -> list[View]:
    """Each reader's summaries of the run keys, without freshness fields."""
    kafka = KafkaConnection(settings)
    everything = replay_all(kafka)
    views: list[View] = [{k: expected(settings, k) for k in run_keys}]
    views.append({k: bare(replay_run(kafka, k).summaries[k]) for k in run_keys})
    views.append({k: bare(everything.summaries[k]) for k in run_keys})
    views.extend({k: held(aggregator, k) for k in run_keys} for aggregator in aggregators)
    return views


def _roll_segment(settings: Settings, partition: int) -> None:
    """Write one record of another run into `partition` after segment.ms: the segment rolls."""
    filler = next(
        k
        for i in range(1000)
        if partition_for(k := RunKey(f"filler-{i}", "arith", MODEL), settings.partitions)
        == partition
    )
    time.sleep(SEGMENT_MS * 1.5 / 1000)
    write(settings, [make_record(0, 0, run_key=filler, created_offset_ms=int(time.time()))])


def _compacted(settings: Settings, partition: int, before: list[RawRecord]) -> list[RawRecord]:
    """Wait until the cleaner dropped superseded values of the partition; return what is left."""
    keys = {r.key for r in before}

    def dropped() -> list[RawRecord] | None:
        now = read_partition(settings, settings.results_topic, partition)
        left = [r for r in now if r.key in keys]
        return now if len(left) < len(before) else None

    return wait_for(dropped, "the cleaner to compact the partition", timeout_s=90)


def _compact_and_compare(
    settings: Settings, run_keys: list[RunKey], watching: Aggregator, phase: str
) -> tuple[int, int]:
    # The first run key's partition holds superseded values: the cleaner must drop some.
    partition = run_partition(settings, run_keys[0])
    before = read_partition(settings, settings.results_topic, partition)
    views_before = _views(settings, run_keys, [watching])
    _roll_segment(settings, partition)
    after = _compacted(settings, partition, before)
    with serving_aggregator(settings) as (rebuilt, _):
        views_after = _views(settings, run_keys, [watching, rebuilt])
    reference = views_before[0]
    wrong = sum(view != reference for view in [*views_before, *views_after])
    raw_before, raw_after = len(before), len([r for r in after if r in before])
    report(f"compaction-{phase}", raw_before=raw_before, raw_after=raw_after, wrong_summaries=wrong)
    assert wrong == 0, (views_before, views_after)
    assert raw_after < raw_before
    for run_key in run_keys:  # offsets never move: the index still guides reads, exactly
        scan = full_scan(settings, run_key)
        wait_indexed(settings, run_key, max(offset for offset, _ in scan.values()) + 1)
        out = read_one_run(settings, run_key)
        assert out.guided and out.latest == scan, run_key
    return raw_before, raw_after


def test_summaries_survive_compaction_of_superseded_records(kafka_bootstrap: str) -> None:
    settings = topic_settings(kafka_bootstrap, extra_config=COMPACTING)
    bench = limit_samples(arith(), SAMPLES)
    main, other = RunKey("compact", bench.name, MODEL), RunKey("other", bench.name, MODEL)
    with ModelServer(latency_s=0.0, error_rate=0.1) as server:
        for sample in bench.samples()[:6]:  # degraded in the first run only: superseded later
            server.override(sample.id, 0, Behavior(status=500))

        def run(run_id: str) -> RunResult:
            return asyncio.run(
                run_once(settings, bench, run_id, server.base_url, epochs=EPOCHS, concurrency=4)
            )

        first = run("compact")
        run("other")
        server.clear_overrides()
        second = run("compact")
        assert second.degraded < first.degraded
        with serving_aggregator(settings) as (watching, _):
            wait_for(
                lambda: held(watching, main) == expected(settings, main),
                "the aggregator to catch up",
            )
            _compact_and_compare(settings, [main, other], watching, "1")
            third = run("compact")  # re-writes the still degraded pairs after compaction
            assert third.degraded > 0
            wait_for(
                lambda: held(watching, main) == bare(third.summary),
                "the aggregator to see the third run",
            )
            _compact_and_compare(settings, [main, other], watching, "2")
    assert bare(third.summary) == expected(settings, main)
