"""`resultlog purge`: tombstones for every key of a run and its summary; every reader forgets it."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey, encode_key, encode_run_key, partition_for, run_key_prefix
from resultlog.settings import Settings
from tests.consumers.support import bare, expected, path
from tests.faults.conftest import make_settings
from tests.faults.support import (
    MODEL,
    cli,
    produce_raw,
    report,
    run_once,
    scan,
    serving_aggregator,
    small_bench,
    wait_for,
)

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
    partition = partition_for(run_key, settings.partitions)
    assert produce_raw(settings, [(key, b"garbage") for key in keys], partition) == []


def _summary_value(settings: Settings, run_key: RunKey) -> tuple[bool, bytes | None]:
    """Whether the summaries topic has the run key, and its latest value (None: tombstone)."""
    partition = partition_for(run_key, settings.partitions)
    wanted = encode_run_key(run_key)
    found = [r for r in scan(settings.client_config(), settings.summaries_topic, partition)
             if r.key == wanted]  # fmt: skip
    return bool(found), found[-1].value if found else None


def _purge(settings: Settings, run_key: RunKey, *extra: str) -> str:
    done = cli(
        settings,
        *["purge", "--run-id", run_key.run_id, "--benchmark", run_key.benchmark_id],
        *["--model", run_key.model, *extra],
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _cli_json(settings: Settings, command: str, run_key: RunKey) -> dict[str, object]:
    done = cli(
        settings,
        *[command, "--run-id", run_key.run_id, "--benchmark", run_key.benchmark_id],
        *["--model", run_key.model, "--json"],
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_purge_deletes_the_run_for_every_reader(kafka_bootstrap: str) -> None:
    settings = make_settings(kafka_bootstrap)
    bench = small_bench(SAMPLES)
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

        status = _cli_json(settings, "status", doomed)
        assert (status["records"], status["completed"], status["degraded"]) == (0, 0, 0)
        assert status["undecodable"] == 0
        assert _cli_json(settings, "replay", doomed)["records"] == 0
        gone = wait_for(
            lambda: (r := httpx.get(base_url + path(doomed), timeout=5)).status_code == 404 and r,
            "the aggregator to drop the run",
        )
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
    report("purge", deleted=SAMPLES * EPOCHS + 1, left_after=status["records"], wrong_summaries=0)
