"""Helpers of the distributed-worker tests: processes, the worker group, the request log."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from resultlog.consumers import read_run_records
from resultlog.kafka import KafkaClientError, KafkaConnection
from resultlog.producer.worker import ChunkWorker, WorkerOptions, WorkerReport
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.cli import cli_argv
from tests.support.processes import model_server
from tests.support.processes import requests_in as requests_logged

T = TypeVar("T")
MODEL = "offline/gpt-4o"


def work_env(env: dict[str, str], group: str, **extra: str) -> dict[str, str]:
    """A CLI environment whose workers form `group`, notice a dead member within 6 s, and
    ask the model once per pair (no client retries: the request log counts pairs)."""
    return {
        **env,
        "RESULTLOG_WORK_GROUP": group,
        "RESULTLOG_WORK_SESSION_TIMEOUT_MS": "6000",
        "RESULTLOG_MODEL_MAX_RETRIES": "0",
        **extra,
    }


def model_server_process(
    tmp_path: Path, env: dict[str, str], latency_ms: int
) -> contextlib.AbstractContextManager[tuple[str, Path]]:
    """The offline model server as its own process, logging every request to a file."""
    return model_server(tmp_path, env, "--latency-ms", str(latency_ms))


def requests_in(log: Path) -> Counter[tuple[str, int]]:
    """How often each (sample_id, epoch) was asked, from the model server's request log."""
    return Counter(requests_logged(log))


def start_worker(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    """A `resultlog -v worker` process (its log on stderr)."""
    return subprocess.Popen(
        cli_argv("-v", "worker", *args),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def assigned_members(settings: Settings, group: str) -> int:
    """How many members of the group hold at least one partition of the work topic."""
    admin = AdminClient(settings.client_config())
    try:
        description = admin.describe_consumer_groups([group])[group].result(timeout=10)
    except Exception:  # the group does not exist yet
        return 0
    return sum(
        any(tp.topic == settings.work_topic for tp in member.assignment.topic_partitions)
        for member in description.members
    )


def all_committed(settings: Settings, group: str) -> bool:
    """True when the group has committed every task on the work topic (False while a broker
    fails over and cannot say)."""
    kafka = KafkaConnection(settings)
    partitions = list(range(settings.work_partitions))
    probe = {**settings.client_config(), "group.id": f"{group}.probe", "log_level": 0}
    consumer = Consumer(probe)
    try:
        committed = kafka.committed_offsets(group, settings.work_topic, partitions)
        for partition in partitions:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(settings.work_topic, partition), timeout=10, cached=False
            )
            if committed.get(partition, 0) < high:
                return False
    except (KafkaException, KafkaClientError):
        return False
    finally:
        consumer.close()
    return True


def records_of(settings: Settings, run_id: str, benchmark: str = "arith") -> list[SampleResult]:
    """The run's latest records."""
    return read_run_records(KafkaConnection(settings), RunKey(run_id, benchmark, MODEL)).records


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary without its run id, freshness and wall-clock time (differs between runs)."""
    return {k: v for k, v in summary.items() if k not in ("run_id", "as_of", "generation_time_ms")}


def last_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON object on the last line of a command's output."""
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def committed_tasks(kafka: KafkaConnection) -> int:
    """How many tasks the worker group has settled, over every partition."""
    settings = kafka.settings
    partitions = list(range(settings.work_partitions))
    offsets = kafka.committed_offsets(settings.work_group, settings.work_topic, partitions)
    return sum(offsets.values())


def serve_until(kafka: KafkaConnection, settled: int) -> WorkerReport:
    """Run a worker in a thread until `settled` tasks are committed, then stop it."""
    worker = ChunkWorker(kafka, WorkerOptions(kafka.settings.work_group, concurrency=2))
    reports: list[WorkerReport] = []
    thread = threading.Thread(target=lambda: reports.append(worker.run()))
    thread.start()
    deadline = time.monotonic() + 120
    while committed_tasks(kafka) < settled and time.monotonic() < deadline:
        time.sleep(0.1)
    worker.stop()
    thread.join(30)
    assert reports, "the worker did not stop"
    return reports[0]
