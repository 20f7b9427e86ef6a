"""A results topic deleted and re-created under the same name is another log: the run index
and a running aggregator bound to the old one never make a reader miss records, a re-run pay
again, or the aggregator serve the old log's summaries as fresh."""

from __future__ import annotations

import itertools
from pathlib import Path

import httpx
import pytest

from resultlog.consumers import fold_records
from resultlog.consumers._index_codec import MARKER_KEY, IndexedLog, Intervals, encode_intervals
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey, SampleResult, partition_for, run_key_prefix
from resultlog.settings import Settings
from tests.support.aggregator import path
from tests.support.aggregator_process import aggregator_process, recreate_results_topic
from tests.support.cli import child_env, printed_json, run_cli
from tests.support.kafka import produce_raw, run_partition
from tests.support.records import make_record
from tests.support.runindex import (
    full_scan,
    index_records,
    indexed_through,
    put,
    read_one_run,
    wait_indexed,
)
from tests.support.summaries import bare, published
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(900)]

A4 = RunKey("A4", "arith", "demo/model")


def _neighbours(settings: Settings, run_key: RunKey, count: int) -> list[RunKey]:
    """Run keys of other runs in the run key's partition."""
    wanted = partition_for(run_key, settings.partitions)
    names = (RunKey(f"filler-{i}", "arith", "m") for i in itertools.count())
    return list(
        itertools.islice(
            (k for k in names if partition_for(k, settings.partitions) == wanted), count
        )
    )


def _filler(runs: list[RunKey], per_run: int, round_: int = 0) -> list[SampleResult]:
    return [
        make_record(s, 0, "C", run_key=run, epochs=1, dataset_size=None, created_offset_ms=round_)
        for run in runs
        for s in range(per_run)
    ]


def _scanned(settings: Settings, run_key: RunKey) -> dict[str, object]:
    """The run's summary folded over a full scan of its partition (no index involved)."""
    with KafkaConnection(settings) as kafka:
        decode = kafka.codec.decode_sample_result
        records = [decode(value) for _, value in full_scan(settings, run_key).values()]
    return bare(fold_records(records, run_key))


def _run_a4(env: dict[str, str], server: ModelServer) -> dict[str, object]:
    args = ("run", "arith", "--model", A4.model, "--run-id", A4.run_id, "--limit", "150")
    return printed_json(run_cli(env, *args, "--base-url", server.base_url, "--json"))


def _summary_of(env: dict[str, str], command: str) -> dict[str, object]:
    args = ("--run-id", A4.run_id, "--benchmark", A4.benchmark_id, "--model", A4.model)
    return printed_json(run_cli(env, command, *args, "--json"))


def test_a_stale_index_of_a_recreated_topic_is_refused(settings: Settings, tmp_path: Path) -> None:
    """Aggregator stopped, topic re-created, a run rewritten and its partition pushed past the
    old marker: status and replay equal a full scan; a re-run asks the model nothing."""
    fillers = _neighbours(settings, A4, 4)
    with ModelServer(
        latency_s=0.0, error_rate=0.0, request_log=tmp_path / "requests.jsonl"
    ) as server:
        env = child_env(settings, RESULTLOG_API_KEY="offline")
        put(settings, _filler(fillers, 200))
        _run_a4(env, server)
        put(settings, _filler(fillers, 200, 1))
        partition = run_partition(settings, A4)
        with aggregator_process(settings):
            old_end = 1750  # 4 x 200 + 150 + 4 x 200 records in A4's partition
            wait_indexed(settings, A4, old_end)
        old_marker = indexed_through(settings, partition)
        recreate_results_topic(settings)

        _run_a4(env, server)  # the new log: every pair asked again, once
        put(settings, _filler(fillers, 450, 2))  # the partition past the old marker
        asked = len(server.requests)
        scan = full_scan(settings, A4)
        assert len(scan) == 150 and max(o for o, _ in scan.values()) < old_marker
        assert read_one_run(settings, A4).latest == scan
        expected = _scanned(settings, A4)
        for command in ("status", "replay"):
            said = _summary_of(env, command)
            assert said["records"] == expected["records"] == 150, said
            assert said["spent_cost"] == expected["spent_cost"], said
        again = _run_a4(env, server)
        assert len(server.requests) == asked, "a re-run asked the model again"
        assert again["records"] == 150

        with aggregator_process(settings):  # rewrites the index of the new log from scratch
            wait_indexed(settings, A4, 150 + 4 * 450)
            out = read_one_run(settings, A4)
        assert out.guided and out.latest == full_scan(settings, A4)
        with KafkaConnection(settings) as kafka:
            _, topic_id = kafka.topic_identity(settings.results_topic)
        live = [r for r in index_records(settings, partition).values() if r is not None]
        assert live and {r.log.topic_id for r in live} == {topic_id}


def test_a_running_aggregator_rebuilds_a_recreated_topic(settings: Settings) -> None:
    """The aggregator running through the same re-creation: the old log's summaries are never
    served as fresh once it is gone, and a new run's summary equals replay within 30 s."""
    old = [RunKey(f"B{i}", "arith", "m") for i in range(6)]
    new = RunKey("B26", "arith", "m")
    with aggregator_process(settings) as aggregator:
        put(settings, _filler(old, 300))
        aggregator.wait_equal(settings, old)
        recreate_results_topic(settings)

        def not_fresh(run_key: RunKey) -> bool:
            response = httpx.get(aggregator.url + path(run_key), timeout=5)
            return response.status_code != 200 or "stale" in response.json()

        wait_for(lambda: all(not_fresh(k) for k in old), "the old log's summaries not fresh", 30)
        put(settings, _filler([new], 150))
        wait_for(
            lambda: aggregator.served(new) == _scanned(settings, new), "the new run's summary", 30
        )
        assert all(not_fresh(k) for k in old)
        assert all(full_scan(settings, k) == {} for k in old)
        wait_for(
            lambda: all(published(settings).get(k) is None for k in old),
            "the deleted log's summaries tombstoned on the summaries topic",
        )
        wait_indexed(settings, new, 150)
        assert read_one_run(settings, new).latest == full_scan(settings, new)
    assert "was deleted and re-created" in aggregator.stderr


def test_a_wrong_index_entry_is_caught_by_what_the_reader_meets(settings: Settings) -> None:
    """A decodable entry of the right log that names too few offsets: the reader meets the
    run's records past it and reads the partition in full."""
    run = RunKey("B9", "arith", "m")
    put(settings, _filler([run], 400))
    with aggregator_process(settings):
        wait_indexed(settings, run, 400)
    partition = run_partition(settings, run)
    with KafkaConnection(settings) as kafka:
        cluster_id, topic_id = kafka.topic_identity(settings.results_topic)
    forged = encode_intervals(
        IndexedLog(settings.results_topic, cluster_id, topic_id), partition, Intervals([150], [160])
    )
    entry = (run_key_prefix(run), forged, partition)
    assert produce_raw(settings, [entry], topic=settings.index_topic) == []
    assert MARKER_KEY in index_records(settings, partition)
    out = read_one_run(settings, run)
    assert len(out.latest) == 400 and out.latest == full_scan(settings, run)
