"""A topic that no longer matches the settings: every client refuses it with one line.

Raising the results topic from 3 to 6 partitions moves every run key to another partition, so
readers would find nothing and a re-run would pay for every pair again. `status`, `replay`,
`run` (before any model request) and a running aggregator each stop with the one line instead.
"""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)

from resultlog.producer.offline import ModelServer
from resultlog.settings import Settings
from tests.support.audit import report
from tests.support.cli import child_env, cli_argv, run_cli
from tests.support.runs import MODEL
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

RUN = ["--run-id", "grown", "--benchmark", "arith", "--model", MODEL]


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def _run(settings: Settings, base_url: str) -> subprocess.CompletedProcess[str]:
    args = ["run", "arith", "--model", MODEL, "--run-id", "grown", "--limit", "10"]
    return run_cli(child_env(settings), *args, "--epochs", "2", "--base-url", base_url, "--json")


def _start_aggregator(settings: Settings) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        cli_argv("aggregator", "--http", "127.0.0.1:0"),
        env=child_env(settings),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().startswith("aggregator serving"), process.stderr
    return process


def _exit_time(process: subprocess.Popen[str]) -> float:
    process.wait(60)
    return time.monotonic()


def test_a_results_topic_with_more_partitions_is_refused_by_every_client(
    settings: Settings, admin: AdminClient
) -> None:
    with ModelServer(latency_s=0.001) as server:
        assert _run(settings, server.base_url).returncode == 0
        paid = len(server.requests)
        aggregator = _start_aggregator(settings)
        exited: list[float] = []
        watcher = threading.Thread(target=lambda: exited.append(_exit_time(aggregator)))
        watcher.start()
        try:
            grown_at = time.monotonic()
            futures = admin.create_partitions([NewPartitions(settings.results_topic, 6)])
            futures[settings.results_topic].result(30)
            wanted = (
                f"resultlog: error: topic {settings.results_topic} has 6 partitions but the "
                "settings say 3 (RESULTLOG_PARTITIONS): run keys would map to other partitions "
                "and existing runs would look empty; refusing to use it"
            )
            refusals = {
                "status": run_cli(child_env(settings), "status", *RUN, "--json"),
                "replay": run_cli(child_env(settings), "replay", *RUN, "--json"),
                "run": _run(settings, server.base_url),
            }
            for command, done in refusals.items():
                assert _one_line_error(done) == wanted, command
                assert done.stdout == "", command
            assert len(server.requests) == paid  # nothing asked of the model again
            watcher.join(60)
            stopped_s = exited[0] - grown_at
            assert aggregator.stderr is not None
            stderr = aggregator.stderr.read()
        finally:
            aggregator.kill()
            aggregator.wait()
    assert aggregator.returncode == 1
    assert stderr.strip().splitlines()[-1] == wanted
    report("topic-layout", refused=len(refusals) + 1, paid_again=0, aggregator_s=f"{stopped_s:.1f}")


def test_a_results_topic_that_deletes_records_is_refused(
    settings: Settings, admin: AdminClient
) -> None:
    resource = ConfigResource(
        ConfigResource.Type.TOPIC,
        settings.results_topic,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([resource])[resource].result(30)
    wait_for(
        lambda: run_cli(child_env(settings), "status", *RUN).returncode == 1,
        "the policy change to be seen",
    )
    done = run_cli(child_env(settings), "status", *RUN)
    assert _one_line_error(done) == (
        f"resultlog: error: topic {settings.results_topic} has cleanup.policy=delete but "
        "resultlog needs compact; refusing to use it"
    )
