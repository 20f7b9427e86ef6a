"""The aggregator's checkpoints under faults, as real processes: a checkpoint of a results
topic deleted and re-created since, a checkpoint of an older format, and garbage keys on the
checkpoints topic (with and without a tombstone)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import httpx
import pytest

from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.aggregator import path
from tests.support.aggregator_process import (
    aggregator_process,
    recreate_results_topic,
    two_epoch_records,
)
from tests.support.kafka import produce_raw, run_partition, topic_settings, write_many
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

OLD = [RunKey(f"old-{i}", "arith", "openai/gpt-4o") for i in range(4)]
GONE = [RunKey(f"gone-{i}", "arith", "openai/gpt-4o") for i in range(4)]


@pytest.fixture
def fresh(kafka_bootstrap: str, unique_name: str) -> Iterator[Settings]:
    """This test's topics, checkpointing often."""
    made = topic_settings(
        kafka_bootstrap, unique_name, checkpoint_every_records=50, checkpoint_interval_s=0.5
    )
    yield made
    with KafkaConnection(made) as kafka:
        kafka.admin().delete_topics(made.every_topic())


def test_a_checkpoint_of_a_deleted_and_recreated_topic_is_never_restored(
    fresh: Settings,
) -> None:
    write_many(fresh, two_epoch_records(OLD + GONE, range(10)))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, OLD + GONE)
        wait_for(lambda: agg.metric("checkpoints_written_total") >= 1, "a checkpoint")
    recreate_results_topic(fresh)
    # More records per partition than before, so old offsets lie inside the new log: only
    # the topic ID tells the old checkpoints from the new log.
    write_many(fresh, two_epoch_records(OLD, range(10, 100)))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, OLD)
        for run_key in GONE:
            assert httpx.get(agg.url + path(run_key), timeout=5).status_code == 404
        listed = {s["run_id"] for s in httpx.get(agg.url + "/runs", timeout=5).json()}
        assert listed == {k.run_id for k in OLD}
        assert agg.metric("checkpoints_restored_total") == 0
        ignored = agg.metric("checkpoints_ignored_total", reason="foreign_topic")
        assert ignored >= 1
    # One warning per refused partition checkpoint, each naming why.
    assert agg.warnings("foreign_topic", of="checkpoint") == ignored


def test_a_garbage_checkpoint_key_is_skipped_with_or_without_a_tombstone(
    fresh: Settings,
) -> None:
    write_many(fresh, two_epoch_records(OLD, range(20)))
    with aggregator_process(fresh) as agg:
        agg.wait_equal(fresh, OLD)
        wait_for(lambda: agg.metric("checkpoints_written_total") >= 1, "a checkpoint")
    partition = run_partition(fresh, OLD[0])
    garbage = [
        f"{fresh.results_topic}/\u00b2/1/w/0".encode(),
        f"{fresh.results_topic}/{partition}/99999999999999999999/w/0".encode(),
    ]
    topic = fresh.checkpoints_topic
    produce_raw(fresh, [(key, b"junk", partition) for key in garbage], topic)
    _restores_serves_and_checkpoints(fresh, range(20, 25))
    produce_raw(fresh, [(key, None, partition) for key in garbage], topic)  # tombstones
    _restores_serves_and_checkpoints(fresh, range(25, 30))


def _restores_serves_and_checkpoints(settings: Settings, indexes: range) -> None:
    """An aggregator of a new machine (no state directory) starts, restores from the
    checkpoints, serves what replay says, and checkpoints new records."""
    assert settings.aggregator_state_dir is not None
    shutil.rmtree(settings.aggregator_state_dir, ignore_errors=True)
    with aggregator_process(settings) as agg:
        agg.wait_equal(settings, OLD)
        assert agg.metric("checkpoints_restored_total") >= 1
        before = agg.metric("checkpoints_written_total")
        write_many(settings, two_epoch_records(OLD, indexes))
        agg.wait_equal(settings, OLD)
        wait_for(lambda: agg.metric("checkpoints_written_total") > before, "a new checkpoint")
        assert agg.metric("checkpoint_failures_total") == 0
