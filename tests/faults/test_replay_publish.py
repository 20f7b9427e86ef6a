"""`replay --publish` never writes a stale, phantom or resurrected summary, and the aggregator
corrects what other writers leave on the summaries topic."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from resultlog.consumers import SummaryPublisher, publish_replayed, replay_run
from resultlog.kafka import KafkaConnection
from resultlog.producer import purge_run
from resultlog.schemas import AsOf, RunKey, encode_key, encode_run_key, partition_for
from resultlog.settings import Settings
from tests.support.aggregator import serving_aggregator
from tests.support.audit import report
from tests.support.cli import child_env, run_cli
from tests.support.kafka import produce_raw, write
from tests.support.records import make_record
from tests.support.summaries import bare, expected, published
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

MODEL = "offline/gpt-4o"


def _records(run_key: RunKey, start: int, stop: int) -> list:  # type: ignore[type-arg]
    return [
        make_record(i, 0, run_key=run_key, epochs=1, dataset_size=100) for i in range(start, stop)
    ]


def _replay(settings: Settings, run_key: RunKey, *extra: str):  # type: ignore[no-untyped-def]
    args = ["--run-id", run_key.run_id, "--benchmark", run_key.benchmark_id, "--model", MODEL]
    return run_cli(child_env(settings), "replay", *args, *extra)


def test_publish_skips_runs_without_records_and_purged_runs(settings: Settings) -> None:
    ghost = RunKey("never-ran", "arith", MODEL)
    refused = _replay(settings, ghost, "--publish")  # a one-line error, not a no-op
    assert refused.returncode == 1 and "has no records" in refused.stderr
    purged = RunKey("purged", "arith", MODEL)
    write(settings, _records(purged, 0, 10))
    kafka = KafkaConnection(settings)
    assert publish_replayed(kafka, replay_run(kafka, purged)).published == 1
    purge_run(kafka, purged)
    done = _replay(settings, purged, "--publish")
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        f"resultlog: error: run {purged} has no records in {settings.results_topic}\n"
    )
    # The library call publishes nothing for a run without records either.
    report = publish_replayed(kafka, replay_run(kafka, purged))
    assert (report.published, report.empty) == (0, 1)
    latest = published(settings)
    assert ghost not in latest  # no phantom
    assert latest[purged] is None  # the purge's tombstone stays: no resurrection


def test_publish_refuses_a_run_with_unreadable_records(settings: Settings) -> None:
    run_key = RunKey("garbled", "arith", MODEL)
    write(settings, _records(run_key, 0, 10))
    assert _replay(settings, run_key, "--publish").returncode == 0
    good = published(settings)[run_key]
    partition = partition_for(run_key, settings.partitions)
    produce_raw(settings, [(encode_key(run_key, 3, 0), b"garbage", partition)])
    done = _replay(settings, run_key, "--publish")
    assert done.returncode == 1
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .startswith(
            f"resultlog: error: not published: {run_key} has records that could not be read"
        )
    ), done.stderr
    assert published(settings)[run_key] == good  # not overwritten by a summary missing a key


def test_a_replay_that_raced_the_aggregator_never_goes_backwards(settings: Settings) -> None:
    run_key = RunKey("live", "arith", MODEL)
    kafka = KafkaConnection(settings)
    with serving_aggregator(settings):
        write(settings, _records(run_key, 0, 50))
        stale = replay_run(kafka, run_key)  # read at 50 records
        write(settings, _records(run_key, 50, 80))
        wait_for(lambda: (published(settings).get(run_key) or {}).get("records") == 80, "80")
        outcome = publish_replayed(kafka, stale)
        assert (outcome.published, outcome.as_fresh) == (0, 1)
        assert published(settings)[run_key] == expected(settings, run_key)


def test_the_aggregator_corrects_stale_phantom_and_deleted_summaries(settings: Settings) -> None:
    live, phantom = RunKey("live", "arith", MODEL), RunKey("phantom", "arith", MODEL)
    other = RunKey("other", "arith", MODEL)
    kafka = KafkaConnection(settings)
    write(settings, _records(live, 0, 40) + _records(other, 0, 5))
    with serving_aggregator(settings):
        truth = expected(settings, live)
        wait_for(lambda: published(settings).get(live) == truth, "the live run published")
        # What a stale `replay --publish` (or any other writer) could leave behind:
        stale_as_of = AsOf(computed_at=datetime.now(UTC), source="replay", offsets={})
        stale = (
            replay_run(kafka, live)
            .summaries[live]
            .model_copy(update={"records": 12, "as_of": stale_as_of})
        )
        ghost = stale.model_copy(update={"run_id": phantom.run_id})
        started = time.monotonic()
        SummaryPublisher(kafka).publish_all([stale, ghost])
        produce_raw_summary(settings, other, None)  # a tombstone for a live run
        wait_for(
            lambda: _corrected(settings, {live: truth, phantom: None,
                                          other: expected(settings, other)}),
            "the aggregator to correct the summaries topic",
        )  # fmt: skip
        corrected_s = time.monotonic() - started
    report("publish-reconcile", stale=1, phantom=1, deleted=1, corrected_s=f"{corrected_s:.1f}")


def test_the_aggregator_removes_phantoms_an_aggregator_wrote(settings: Settings) -> None:
    live, phantom = RunKey("here", "arith", MODEL), RunKey("vanished", "arith", MODEL)
    kafka = KafkaConnection(settings)
    write(settings, _records(live, 0, 10))
    # An aggregator's summary of a run whose records are gone (a log deleted and recreated):
    ours = AsOf(computed_at=datetime.now(UTC), source="aggregator", offsets={})
    truth = replay_run(kafka, live).summaries[live]
    ghost = truth.model_copy(update={"run_id": phantom.run_id, "as_of": ours})
    SummaryPublisher(kafka).publish_all([ghost])
    assert published(settings)[phantom] is not None
    with serving_aggregator(settings):
        wait_for(
            lambda: _corrected(settings, {live: expected(settings, live), phantom: None}),
            "the aggregator to tombstone the phantom",
        )


def produce_raw_summary(settings: Settings, run_key: RunKey, value: bytes | None) -> None:
    """Write a value for a run key on the summaries topic, bypassing every check."""
    from confluent_kafka import Producer

    producer = Producer(settings.client_config())
    producer.produce(
        settings.summaries_topic,
        key=encode_run_key(run_key),
        value=value,
        partition=partition_for(run_key, settings.partitions),
    )
    assert producer.flush(30) == 0


def _corrected(settings: Settings, want: dict[RunKey, object]) -> bool:
    latest = published(settings)
    return all(latest.get(run_key, "absent") == summary for run_key, summary in want.items())


def test_publish_all_publishes_the_readable_runs_and_refuses_the_others(
    settings: Settings,
) -> None:
    fine, garbled = RunKey("fine", "arith", MODEL), RunKey("garbled", "arith", MODEL)
    write(settings, _records(fine, 0, 5) + _records(garbled, 0, 5))
    partition = partition_for(garbled, settings.partitions)
    produce_raw(settings, [(encode_key(garbled, 2, 0), b"garbage", partition)])
    done = run_cli(child_env(settings), "replay", "--all", "--publish", "--json")
    assert done.returncode == 1 and "not published: " in done.stderr, done.stderr
    latest = published(settings)
    assert latest[fine] == bare(replay_run(KafkaConnection(settings), fine).summaries[fine])
    assert garbled not in latest
