"""The aggregator's saved state under faults, as real processes: a state directory deleted
while stopped or copied from another log, a checkpoint of a results topic deleted and
re-created since, garbage on the checkpoints topic, and a SIGKILL in the middle of writing."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from rocksdict import Options, Rdict

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
NEW = [RunKey(f"new-{i}", "arith", "openai/gpt-4o") for i in range(4)]


@pytest.fixture
def fresh(kafka_bootstrap: str, unique_name: str, tmp_path: Path) -> Iterator[Settings]:
    """This test's topics, checkpointing often, with its state directories under tmp_path."""
    made = topic_settings(
        kafka_bootstrap,
        unique_name,
        checkpoint_every_records=50,
        checkpoint_interval_s=0.5,
        aggregator_state_dir=tmp_path / "machine-a",
    )
    yield made
    with KafkaConnection(made) as kafka:
        kafka.admin().delete_topics(made.every_topic())


def test_a_state_dir_deleted_while_stopped_is_restored_from_checkpoints(fresh: Settings) -> None:
    write_many(fresh, _records(OLD, range(30)))
    with _aggregator(fresh) as agg:
        agg.wait_equal(fresh, OLD)
    shutil.rmtree(_state_dir(fresh))
    write_many(fresh, _records(OLD, range(30, 33)))
    with _aggregator(fresh) as agg:
        agg.wait_equal(fresh, OLD)
        assert agg.metric("checkpoints_restored_total") == fresh.partitions


def test_a_state_dir_of_another_cluster_is_refused_and_rebuilt(fresh: Settings) -> None:
    write_many(fresh, _records(OLD, range(30)))
    with _aggregator(fresh) as agg:
        agg.wait_equal(fresh, OLD)
    _rename_cluster(_state_dir(fresh), "another-cluster")
    write_many(fresh, _records(OLD, range(30, 33)))
    with _aggregator(fresh) as agg:
        agg.wait_equal(fresh, OLD)
        assert agg.metric("states_ignored_total", reason="foreign_cluster") == fresh.partitions
        assert agg.metric("states_restored_total") == 0
    assert agg.warnings("foreign_cluster") == fresh.partitions


@pytest.mark.parametrize("keep_state_dir", [True, False], ids=["same machine", "new machine"])
def test_state_of_a_deleted_and_recreated_topic_is_never_restored(
    fresh: Settings, keep_state_dir: bool
) -> None:
    write_many(fresh, _records(OLD, range(30)))
    with _aggregator(fresh) as agg:
        agg.wait_equal(fresh, OLD)
    _recreate_results_topic(fresh)
    write_many(fresh, _records(NEW, range(12)))
    if not keep_state_dir:
        shutil.rmtree(_state_dir(fresh))
    with _aggregator(fresh) as agg:
        agg.wait_equal(fresh, NEW)
        for run_key in OLD:
            assert httpx.get(agg.url + path(run_key), timeout=5).status_code == 404
        listed = {(s["run_id"]) for s in httpx.get(agg.url + "/runs", timeout=5).json()}
        assert listed == {k.run_id for k in NEW}
        assert agg.metric("checkpoints_restored_total") == 0
        assert agg.metric("states_restored_total") == 0
    assert agg.warnings("foreign_topic") >= 1


def test_a_garbage_checkpoint_key_is_skipped_even_after_a_tombstone(fresh: Settings) -> None:
    write_many(fresh, _records(OLD, range(20)))
    with _aggregator(fresh) as agg:
        agg.wait_equal(fresh, OLD)
    garbage = [
        f"{fresh.results_topic}/\u00b2/1/w/0".encode(),
        f"{fresh.results_topic}/0/99999999999999999999/w/0".encode(),
    ]
    partition = run_partition(fresh, OLD[0])
    produce_raw(fresh, [(key, b"junk", partition) for key in garbage], fresh.checkpoints_topic)
    produce_raw(fresh, [(key, None, partition) for key in garbage], fresh.checkpoints_topic)
    shutil.rmtree(_state_dir(fresh))  # restore from the checkpoints topic
    with _aggregator(fresh) as agg:
        agg.wait_equal(fresh, OLD)
        assert agg.metric("checkpoints_restored_total") == fresh.partitions
        write_many(fresh, _records(OLD, range(20, 25)))
        agg.wait_equal(fresh, OLD)
        wait_for(lambda: agg.metric("checkpoints_written_total") > 0, "a new checkpoint")


def test_sigkill_while_writing_the_store_then_restart_equals_replay(fresh: Settings) -> None:
    write_many(fresh, _records(OLD, range(100)))
    tiny_cache = fresh.model_copy(update={"aggregator_cache_keys": 64})  # flushes all the time
    writer = threading.Thread(target=write_many, args=(fresh, _records(OLD, range(100, 600))))
    with _aggregator(tiny_cache, stop=signal.SIGKILL) as agg:
        writer.start()
        wait_for(lambda: agg.metric("records_consumed_total") > 1000, "ingestion under way")
    writer.join(120)
    with _aggregator(fresh) as agg:
        agg.wait_equal(fresh, OLD)
        # Each partition holding records flushed at least once (64 keys); an empty one may
        # have been killed before its first save, which costs nothing to re-read.
        holding = {run_partition(fresh, run_key) for run_key in OLD}
        assert agg.metric("states_restored_total") >= len(holding)
        assert agg.metric("records_consumed_total") < len(_records(OLD, range(600)))


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
        return len(re.findall(rf"WARNING.*ignoring the .*\({reason}\)", self.stderr))

    def _served(self, run_key: RunKey) -> object:
        response = httpx.get(self.url + path(run_key), timeout=5)
        body = response.json()
        return bare(body) if response.status_code == 200 and "stale" not in body else None


@contextmanager
def _aggregator(settings: Settings, stop: signal.Signals = signal.SIGTERM) -> Iterator[_Running]:
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
        process.send_signal(stop)
        _, running.stderr = process.communicate(timeout=60)


def _state_dir(settings: Settings) -> Path:
    assert settings.aggregator_state_dir is not None
    return settings.aggregator_state_dir


def _rename_cluster(root: Path, cluster_id: str) -> None:
    """Make every partition store under `root` say it was saved from another cluster."""
    stores = [meta.parent for meta in root.rglob("CURRENT")]
    assert stores
    for store in stores:
        db = Rdict(str(store), Options(raw_mode=True))
        try:
            meta = db[b"\x00meta"]
            assert isinstance(meta, bytes)
            db[b"\x00meta"] = re.sub(
                rb'"cluster_id": "[^"]*"', f'"cluster_id": "{cluster_id}"'.encode(), meta
            )
        finally:
            db.close()


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
