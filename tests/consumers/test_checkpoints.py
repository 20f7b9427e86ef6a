"""Aggregator checkpoints against a real broker: a restart restores them and reads only the
tail, serving what replay computes; unusable checkpoints are ignored with a warning."""

from __future__ import annotations

import logging
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition

from resultlog.consumers.aggregator import Aggregator
from resultlog.consumers.aggregator._health import Health
from resultlog.consumers.aggregator._metrics import AggregatorMetrics
from resultlog.consumers.aggregator._state import PartitionState, Shared
from resultlog.consumers.aggregator.checkpoint import Checkpoints
from resultlog.consumers.aggregator.checkpoint._codec import (
    CheckpointId,
    Header,
    decode,
    encode_header,
    header_key,
)
from resultlog.kafka import KafkaConnection
from resultlog.producer import purge_run
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.aggregator import held, metric, started
from tests.support.checkpoints import v1_header
from tests.support.cli import child_env, cli_argv
from tests.support.kafka import (
    drop_topics,
    produce_raw,
    read_topic,
    run_partition,
    topic_settings,
    write_many,
)
from tests.support.records import make_record
from tests.support.summaries import Summary, expected
from tests.support.waiting import wait_for

RUNS = [RunKey(f"ckpt-{i}", "arith", "openai/gpt-4o") for i in range(4)]


@pytest.fixture
def checkpointing(kafka_bootstrap: str, unique_name: str) -> Iterator[Settings]:
    """This test's topics; the aggregator checkpoints every 50 records or half a second."""
    made = topic_settings(
        kafka_bootstrap, unique_name, checkpoint_every_records=50, checkpoint_interval_s=0.5
    )
    yield made
    drop_topics(made)


def test_a_restart_restores_checkpoints_and_reads_only_the_tail(checkpointing: Settings) -> None:
    settings = checkpointing
    write_many(settings, _records(range(0, 40)))
    _serve_until_equal(settings)  # a clean stop checkpoints every partition it held
    tail = _records(range(40, 45))
    write_many(settings, tail)
    with started(settings, _new_machine(settings)) as aggregator:
        _wait_equal(aggregator, settings, RUNS)
        assert metric(aggregator, "records_consumed_total") == len(tail)
        assert metric(aggregator, "checkpoints_restored_total") == len(_partitions())
        assert aggregator.lookup(RUNS[0]).summary is not None


def test_sigkill_after_a_checkpoint_then_restart_is_still_exact(checkpointing: Settings) -> None:
    settings = checkpointing
    first_batch = _records(range(0, 40))
    write_many(settings, first_batch)
    process = _start_cli(settings)
    try:
        wait_for(lambda: _covered(settings) == _ends(settings), "checkpoints up to the end")
        write_many(settings, _records(range(40, 50)))
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(10)
    with started(settings, _new_machine(settings)) as aggregator:
        _wait_equal(aggregator, settings, RUNS)
        consumed = metric(aggregator, "records_consumed_total")
        assert consumed <= len(_records(range(40, 50))) < len(first_batch)
        assert metric(aggregator, "checkpoints_restored_total") == len(_partitions())


def test_a_corrupt_checkpoint_is_ignored_with_a_warning(
    checkpointing: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings = checkpointing
    write_many(settings, _records(range(0, 30)))
    _serve_until_equal(settings)
    partition = run_partition(settings, RUNS[0])
    key = header_key(settings.results_topic, partition)
    garbage = b"\xc3\x01not a checkpoint"
    produce_raw(settings, [(key, garbage, partition)], settings.checkpoints_topic)
    caplog.clear()
    with caplog.at_level(logging.WARNING), started(settings, _new_machine(settings)) as aggregator:
        _wait_equal(aggregator, settings, RUNS)
        assert metric(aggregator, "checkpoints_ignored_total", reason="corrupt") == 1
        assert metric(aggregator, "records_consumed_total") == _ends(settings)[partition]
    assert _warnings(caplog, partition) == ["corrupt"]


def test_a_checkpoint_past_the_end_is_ignored_with_a_warning(
    checkpointing: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    settings = checkpointing
    write_many(settings, _records(range(0, 30)))
    partition = run_partition(settings, RUNS[0])
    beyond = _ends(settings)[partition] + 1000
    with KafkaConnection(settings) as kafka:
        log_id = kafka.topic_identity(settings.results_topic)
    checkpoint = CheckpointId(settings.results_topic, partition, 3, 7, "forged", beyond, *log_id)
    value = encode_header(Header(checkpoint, 0, 2**62, 0, 0))
    key = header_key(settings.results_topic, partition)
    produce_raw(settings, [(key, value, partition)], settings.checkpoints_topic)
    caplog.clear()
    with caplog.at_level(logging.WARNING), started(settings, _new_machine(settings)) as aggregator:
        _wait_equal(aggregator, settings, RUNS)
        assert metric(aggregator, "checkpoints_ignored_total", reason="beyond_end") == 1
    assert _warnings(caplog, partition) == ["beyond_end"]


@pytest.mark.parametrize("reason", ["foreign_cluster", "foreign_topic", "old_version"])
def test_a_checkpoint_of_another_log_is_ignored_with_a_warning(
    checkpointing: Settings, caplog: pytest.LogCaptureFixture, reason: str
) -> None:
    settings = checkpointing
    write_many(settings, _records(range(0, 30)))
    partition = run_partition(settings, RUNS[0])
    with KafkaConnection(settings) as kafka:
        cluster_id, topic_id = kafka.topic_identity(settings.results_topic)
    if reason == "foreign_cluster":
        cluster_id = "another-cluster"
    elif reason == "foreign_topic":
        topic_id = "AAAAAAAAAAAAAAAAAAAAAA"  # a topic deleted since
    # Offsets inside the log and no runs: restored, it would hide every run of the partition.
    checkpoint = CheckpointId(
        settings.results_topic, partition, 3, 7, "forged", _ends(settings)[partition],
        cluster_id, topic_id,
    )  # fmt: skip
    value = (
        v1_header(checkpoint, 0, 0, 0)
        if reason == "old_version"
        else encode_header(Header(checkpoint, 0, 2**62, 0, 0))
    )
    key = header_key(settings.results_topic, partition)
    produce_raw(settings, [(key, value, partition)], settings.checkpoints_topic)
    caplog.clear()
    with caplog.at_level(logging.WARNING), started(settings, _new_machine(settings)) as aggregator:
        _wait_equal(aggregator, settings, RUNS)
        assert metric(aggregator, "checkpoints_ignored_total", reason=reason) == 1
        assert metric(aggregator, "checkpoints_restored_total") == 0
    assert _warnings(caplog, partition) == [reason]


def test_a_purge_after_a_checkpoint_is_applied(checkpointing: Settings) -> None:
    settings = checkpointing
    write_many(settings, _records(range(0, 30)))
    _serve_until_equal(settings)
    purge_run(KafkaConnection(settings), RUNS[1])
    with started(settings, _new_machine(settings)) as aggregator:
        _wait_equal(aggregator, settings, [k for k in RUNS if k != RUNS[1]])
        assert aggregator.lookup(RUNS[1]).summary is None
        assert expected(settings, RUNS[1])["records"] == 0
        assert metric(aggregator, "checkpoints_restored_total") == len(_partitions())


def test_two_members_of_one_group_restore_and_agree_with_replay(checkpointing: Settings) -> None:
    settings = checkpointing
    write_many(settings, _records(range(0, 30)))
    _serve_until_equal(settings)
    write_many(settings, _records(range(30, 40)))
    first, second = (
        Aggregator(
            KafkaConnection(settings), publish_interval_s=0.05, state_dir=_new_machine(settings)
        )
        for _ in range(2)
    )
    first.start()
    second.start()
    try:
        wait_for(lambda: _ready_split(first, second), "the two members to share the partitions")
        want = {k: expected(settings, k) for k in RUNS}
        wait_for(lambda: {k: _either(first, second, k) for k in RUNS} == want, "both to agree")
        write_many(settings, _records(range(40, 45)))
        want = {k: expected(settings, k) for k in RUNS}
        wait_for(lambda: {k: _either(first, second, k) for k in RUNS} == want, "the new tail")
        restored = sum(metric(a, "checkpoints_restored_total") for a in (first, second))
        assert restored >= len(_partitions())
    finally:
        first.stop()
        second.stop()
    assert first.failure is None and second.failure is None


# -- private helpers ------------------------------------------------------------------------


def _records(indexes: range) -> list[SampleResult]:
    """Two epochs of each index for every run, with floats that do not sum exactly."""
    return [
        make_record(
            i,
            epoch,
            "CI"[(i + epoch) % 2],
            run_key=run_key,
            dataset_size=1000,
            numeric=0.1 * ((i * 7 + epoch) % 11) if i % 3 else None,
            metrics={"reward": 0.3 * i + 0.1, "len": float(i % 5)},
            cost=0.1 + 1e-7 * i,
        )
        for run_key in RUNS
        for i in indexes
        for epoch in range(2)
    ]


def _partitions() -> set[int]:
    return {run_partition(_settings_of_runs(), k) for k in RUNS}


def _settings_of_runs() -> Settings:
    return Settings(partitions=3)  # the run keys' partitions depend on the count only


def _serve_until_equal(settings: Settings) -> None:
    """Run an aggregator until it serves what replay computes, then stop it cleanly."""
    with started(settings, _new_machine(settings)) as aggregator:
        _wait_equal(aggregator, settings, RUNS)


def _wait_equal(aggregator: Aggregator, settings: Settings, runs: list[RunKey]) -> None:
    """Wait until the aggregator holds replay's summary of every run, bit for bit."""
    want = {k: expected(settings, k) for k in runs}
    assert all(w["records"] > 0 for w in want.values())
    wait_for(lambda: aggregator.health().ready, "readiness")
    wait_for(lambda: {k: held(aggregator, k) for k in runs} == want, "replay's summaries")


def _either(first: Aggregator, second: Aggregator, run_key: RunKey) -> Summary | None:
    return held(first, run_key) or held(second, run_key)


def _ready_split(first: Aggregator, second: Aggregator) -> bool:
    one, two = first.health(), second.health()
    owned = [{p.partition for p in h.partitions} for h in (one, two)]
    return one.ready and two.ready and all(owned) and not owned[0] & owned[1]


def _ends(settings: Settings) -> dict[int, int]:
    """Each results partition's high watermark."""
    with KafkaConnection(settings) as kafka:
        consumer = kafka.reader()
        try:
            return {
                p: consumer.get_watermark_offsets(
                    TopicPartition(settings.results_topic, p), timeout=10
                )[1]
                for p in range(settings.partitions)
            }
        finally:
            consumer.close()


def _covered(settings: Settings) -> dict[int, int]:
    """The offset each partition's newest checkpoint header covers (0: none)."""
    covered = dict.fromkeys(range(settings.partitions), 0)
    for message in read_topic(settings, settings.checkpoints_topic):
        for partition in covered:
            if message.key == header_key(settings.results_topic, partition) and message.value:
                header = decode(message.value)
                assert isinstance(header, Header)
                covered[partition] = header.id.next_offset
    return covered


def _warnings(caplog: pytest.LogCaptureFixture, partition: int) -> list[str]:
    """The reasons of the last start's warnings about ignoring a partition's checkpoint."""
    prefix = "ignoring the checkpoint of "
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    return [
        line.split("(", 1)[1].split(")", 1)[0]
        for line in lines
        if line.startswith(prefix) and f"[{partition}] " in line
    ]


def _new_machine(settings: Settings) -> Path:
    """An empty state directory of its own."""
    assert settings.aggregator_state_dir is not None
    return settings.aggregator_state_dir / uuid.uuid4().hex[:8]


def _start_cli(settings: Settings) -> subprocess.Popen[str]:
    state_dir = str(_new_machine(settings))
    command = cli_argv("aggregator", "--http", "127.0.0.1:0", "--state-dir", state_dir)
    process = subprocess.Popen(command, env=child_env(settings), stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("aggregator serving http://"):
        process.kill()
        pytest.fail(f"unexpected first line {line!r} (exit {process.wait(10)})")
    return process


def test_no_checkpoint_is_written_while_another_partition_catches_up(
    checkpointing: Settings,
) -> None:
    settings = checkpointing
    metrics = AggregatorMetrics(lambda: (Health(True, True, ()), 0))
    with KafkaConnection(settings) as kafka:
        checkpoints = Checkpoints(kafka, metrics, 2, 1, max_age_ms=24 * 3600 * 1000)
        checkpoints.identify(("cluster", "topic-id"))
        shared = Shared()
        done = PartitionState(0, position=60, high_at_assign=60, high=60, caught_up=True)
        behind = PartitionState(1, position=10, high_at_assign=90, high=90)
        shared.state.partitions = {0: done, 1: behind}
        checkpoints.write_due(shared)  # 60 records past none: due, but partition 1 is behind
        assert checkpoints._writer.wait({0}, 10)
        assert _headers(settings) == []
        behind.advance(89)
        checkpoints.write_due(shared)
        assert checkpoints._writer.wait({0, 1}, 30)
        checkpoints.close()
    covered = sorted((h.id.partition, h.id.next_offset) for h in _headers(settings))
    assert covered == [(0, 60), (1, 90)]


def _headers(settings: Settings) -> list[Header]:
    found = [decode(r.value) for r in read_topic(settings, settings.checkpoints_topic) if r.value]
    return [item for item in found if isinstance(item, Header)]
