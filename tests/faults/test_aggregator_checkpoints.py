"""The aggregator's checkpoints under faults, as real processes: a checkpoint of a results
topic deleted and re-created since, a checkpoint of an older format, and garbage keys on the
checkpoints topic (with and without a tombstone)."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.aggregator import path
from tests.support.cli import child_env, run_cli
from tests.support.kafka import produce_raw, run_partition, topic_settings, write_many
from tests.support.processes import start
from tests.support.records import make_record
from tests.support.summaries import bare, expected
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
    write_many(fresh, _records(OLD + GONE, range(10)))
    with _aggregator(fresh) as agg:
        agg.wait_equal(fresh, OLD + GONE)
        wait_for(lambda: agg.metric("checkpoints_written_total") >= 1, "a checkpoint")
    _recreate_results_topic(fresh)
    # More records per partition than before, so old offsets lie inside the new log: only
    # the topic ID tells the old checkpoints from the new log.
    write_many(fresh, _records(OLD, range(10, 100)))
    with _aggregator(fresh) as agg:
        agg.wait_equal(fresh, OLD)
        for run_key in GONE:
            assert httpx.get(agg.url + path(run_key), timeout=5).status_code == 404
        listed = {s["run_id"] for s in httpx.get(agg.url + "/runs", timeout=5).json()}
        assert listed == {k.run_id for k in OLD}
        assert agg.metric("checkpoints_restored_total") == 0
        ignored = agg.metric("checkpoints_ignored_total", reason="foreign_topic")
        assert ignored >= 1
    # One warning per refused partition checkpoint, each naming why.
    assert agg.warnings("foreign_topic") == ignored


def test_a_garbage_checkpoint_key_is_skipped_with_or_without_a_tombstone(
    fresh: Settings,
) -> None:
    write_many(fresh, _records(OLD, range(20)))
    with _aggregator(fresh) as agg:
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
    with _aggregator(settings) as agg:
        agg.wait_equal(settings, OLD)
        assert agg.metric("checkpoints_restored_total") >= 1
        before = agg.metric("checkpoints_written_total")
        write_many(settings, _records(OLD, indexes))
        agg.wait_equal(settings, OLD)
        wait_for(lambda: agg.metric("checkpoints_written_total") > before, "a new checkpoint")
        assert agg.metric("checkpoint_failures_total") == 0


# -- private helpers ------------------------------------------------------------------------


class _Running:
    """An aggregator process and its HTTP API."""

    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url
        self.stderr = ""

    def metric(self, name: str, **labels: str) -> float:
        text = httpx.get(self.url + "/metrics", timeout=5).text
        label = ",".join(f'{k}="{v}"' for k, v in labels.items())
        wanted = f"resultlog_aggregator_{name}" + (f"{{{label}}}" if label else "")
        for line in text.splitlines():
            if line.startswith(wanted + " "):
                return float(line.split()[-1])
        return 0.0

    def wait_equal(self, settings: Settings, runs: list[RunKey]) -> None:
        want = {k: expected(settings, k) for k in runs}
        assert all(w["records"] > 0 for w in want.values())
        wait_for(lambda: {k: self._served(k) for k in runs} == want, "replay's summaries")

    def warnings(self, reason: str) -> int:
        return len(re.findall(rf"WARNING.*ignoring the checkpoint .*\({reason}\)", self.stderr))

    def _served(self, run_key: RunKey) -> object:
        response = httpx.get(self.url + path(run_key), timeout=5)
        body = response.json()
        return bare(body) if response.status_code == 200 and "stale" not in body else None


@contextmanager
def _aggregator(settings: Settings) -> Iterator[_Running]:
    process = start(["aggregator", "--http", "127.0.0.1:0"], child_env(settings))
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("aggregator serving http://"):
        process.kill()
        pytest.fail(f"unexpected first line {line!r}: {process.communicate(timeout=10)[1][-2000:]}")
    running = _Running(process, line.split()[-1].rstrip("/"))
    try:
        yield running
    finally:
        process.send_signal(signal.SIGTERM)
        _, running.stderr = process.communicate(timeout=60)
        assert "Traceback" not in running.stderr, running.stderr[-3000:]


def _recreate_results_topic(settings: Settings) -> None:
    with KafkaConnection(settings) as kafka:
        admin = kafka.admin()  # kept referenced: its futures die with it
        admin.delete_topics([settings.results_topic])[settings.results_topic].result(30)
    deadline = time.monotonic() + 60
    while True:
        done = run_cli(child_env(settings), "topics", "create")
        if done.returncode == 0:
            return
        assert time.monotonic() < deadline, done.stderr
        time.sleep(1)


def _records(runs: list[RunKey], indexes: range) -> list[SampleResult]:
    return [
        make_record(
            i,
            epoch,
            "CI"[(i + epoch) % 2],
            run_key=run_key,
            numeric=0.1 * (i % 7),
            dataset_size=1000,
        )
        for run_key in runs
        for i in indexes
        for epoch in range(2)
    ]
