"""Resume reads fold views: what still needs whole records decodes only those records."""

from __future__ import annotations

import pytest

from resultlog.consumers import read_run_records, read_run_views, run_status
from resultlog.kafka import KafkaConnection
from resultlog.producer import ConfigChangedError, check_config, run_config
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.model_client import ModelClient
from resultlog.producer.store import KafkaResultStore
from resultlog.schemas import FoldView, RunKey, SampleResult
from tests.support.records import make_record
from tests.support.runs import MODEL, run_with

HERE = run_config(limit_samples(arith(), 4), MODEL, temperature=0.2)
THERE = run_config(limit_samples(arith(), 4), MODEL, temperature=0.7)


def configured(index: int, run_key: RunKey, *, other: bool, newer: bool = False) -> SampleResult:
    """A record of sample `index` made under THERE (`other`) or HERE."""
    config = THERE if other else HERE
    return make_record(
        index,
        0,
        run_key=run_key,
        epochs=1,
        dataset_size=4,
        created_offset_ms=1000 if newer else 0,
        config=config.canonical,
        config_fingerprint=config.fingerprint,
    )


async def test_a_config_mismatch_names_the_field_from_one_whole_record(
    kafka: KafkaConnection, kafka_store: KafkaResultStore
) -> None:
    run_key = RunKey("views-config", "arith", MODEL)
    for index in range(4):
        await kafka_store.write(configured(index, run_key, other=index == 3))
    loaded = read_run_views(kafka, run_key)
    decoded: list[int] = []

    def whole(view: FoldView) -> SampleResult:
        decoded.append(view.sample_index)
        return loaded.full(view)

    with pytest.raises(ConfigChangedError, match=r"generation\.temperature: 0\.7 there, 0\.2 here"):
        check_config(run_key, HERE, loaded.records, whole=whole)
    assert all(isinstance(record, FoldView) for record in loaded.records)
    assert decoded == [3], "only the differing record is decoded whole"


async def test_status_shows_the_newest_configuration(
    kafka: KafkaConnection, kafka_store: KafkaResultStore
) -> None:
    run_key = RunKey("views-status", "arith", MODEL)
    for index in range(4):
        await kafka_store.write(configured(index, run_key, other=index == 2, newer=index == 2))
    status = run_status(kafka, run_key)
    assert status.config == THERE.as_dict()
    assert status.config_fingerprint == THERE.fingerprint
    assert (status.configs, status.records, status.completed) == (2, 4, 4)


async def test_a_resumed_runs_records_are_the_stored_ones_whole(
    kafka: KafkaConnection, kafka_store: KafkaResultStore, model_client: ModelClient
) -> None:
    bench = limit_samples(arith(), 4)
    await run_with(bench, model_client, kafka_store, "views-whole", sample_range=(0, 2))
    resumed = await run_with(bench, model_client, kafka_store, "views-whole")
    stored = read_run_records(kafka, RunKey("views-whole", "arith", MODEL)).records
    skipped = [r for r in resumed.records if r.sample_index < 2 and not r.degraded]
    assert len(skipped) == resumed.skipped
    assert all(record in stored for record in resumed.records)
