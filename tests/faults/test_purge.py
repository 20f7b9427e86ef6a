"""`resultlog purge`: tombstones for every key of a run and its summary; every reader forgets it."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey, encode_key, encode_run_key, partition_for, run_key_prefix
from resultlog.settings import Settings
from tests.support.aggregator import path, serving_aggregator
from tests.support.audit import report
from tests.support.cli import child_env, run_cli
from tests.support.kafka import produce_raw, read_partition, run_partition, topic_settings
from tests.support.runs import MODEL, run_once
from tests.support.summaries import bare, expected
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

SAMPLES, EPOCHS = 20, 2


def _neighbour(settings: Settings, run_key: RunKey) -> RunKey:
    """Another run key whose records share the partition of `run_key`."""
    want = partition_for(run_key, settings.partitions)
    return next(
        key
        for i in range(1000)
        if partition_for(key := RunKey(f"neighbour-{i}", run_key.benchmark_id, MODEL),
                         settings.partitions) == want
    )  # fmt: skip


def _poison(settings: Settings, run_key: RunKey) -> None:
    """An undecodable latest value for one key, and a key with the run's prefix that won't parse."""
    keys = (encode_key(run_key, 5, 0), run_key_prefix(run_key) + b"not-a-number/0")
    partition = run_partition(settings, run_key)
    assert produce_raw(settings, [(key, b"garbage", partition) for key in keys]) == []


def _summary_value(settings: Settings, run_key: RunKey) -> tuple[bool, bytes | None]:
    """Whether the summaries topic has the run key, and its latest value (None: tombstone)."""
    partition = run_partition(settings, run_key)
    wanted = encode_run_key(run_key)
    found = [r for r in read_partition(settings, settings.summaries_topic, partition)
             if r.key == wanted]  # fmt: skip
    return bool(found), found[-1].value if found else None


def _purge(settings: Settings, run_key: RunKey, *extra: str) -> str:
    done = run_cli(
        child_env(settings),
        *["purge", "--yes", "--run-id", run_key.run_id, "--benchmark", run_key.benchmark_id],
        *["--model", run_key.model, *extra],
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _live(settings: Settings, run_key: RunKey) -> int:
    """The run key's keys whose latest message in the results topic is a value, not a tombstone."""
    latest: dict[bytes, bytes | None] = {}
    partition = run_partition(settings, run_key)
    for record in read_partition(settings, settings.results_topic, partition):
        if record.key is not None and record.key.startswith(run_key_prefix(run_key)):
            latest[record.key] = record.value
    return sum(value is not None for value in latest.values())


def test_purge_deletes_the_run_for_every_reader(kafka_bootstrap: str) -> None:
    settings = topic_settings(kafka_bootstrap)
    bench = limit_samples(arith(), SAMPLES)
    doomed = RunKey("../../etc/purge-me", bench.name, MODEL)
    kept = _neighbour(settings, doomed)
    with ModelServer(latency_s=0.0) as server:
        for run_key in (doomed, kept):
            asyncio.run(run_once(settings, bench, run_key.run_id, server.base_url, epochs=EPOCHS))
    _poison(settings, doomed)
    kept_before = expected(settings, kept)

    with serving_aggregator(settings) as (_, base_url):
        wait_for(lambda: _summary_value(settings, doomed)[1], "the run's summary to be published")
        assert httpx.get(base_url + path(doomed), timeout=5).status_code == 200

        output = _purge(settings, doomed)
        assert output == (
            f"purged {doomed.run_id} / {doomed.benchmark_id} / {doomed.model}: "
            f"{SAMPLES * EPOCHS + 1} record(s) deleted, summary deleted"
        )

        for command in ("status", "replay"):  # a run without records is an error, not zeros
            done = run_cli(
                child_env(settings),
                *[command, "--run-id", doomed.run_id, "--benchmark", doomed.benchmark_id],
                *["--model", doomed.model, "--json"],
            )
            assert done.returncode == 1 and not done.stdout, command
            assert done.stderr == (
                f"resultlog: error: run {doomed} has no records in {settings.results_topic}\n"
            ), command

        def dropped() -> httpx.Response | None:
            response = httpx.get(base_url + path(doomed), timeout=5)
            return response if response.status_code == 404 else None

        gone = wait_for(dropped, "the aggregator to drop the run")
        assert gone.json()["error"] == "not_found"
        wait_for(lambda: _summary_value(settings, doomed) == (True, None), "a summary tombstone")

        assert expected(settings, kept) == kept_before
        assert bare(httpx.get(base_url + path(kept), timeout=5).json()) == kept_before

    again = _purge(settings, doomed)
    assert again == (
        f"no records of {doomed.run_id} / {doomed.benchmark_id} / {doomed.model} in "
        f"{settings.results_topic}; nothing to purge"
    )
    never = RunKey("never-was", bench.name, MODEL)
    assert json.loads(_purge(settings, never, "--json"))["deleted"] == 0
    report(
        "purge", deleted=SAMPLES * EPOCHS + 1, left_after=_live(settings, doomed), wrong_summaries=0
    )
