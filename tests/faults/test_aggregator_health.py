"""`/healthz` is ready only when the aggregator serves what it holds: never with no partition."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

import httpx
import pytest

from resultlog.consumers.aggregator._state import AggregatorState
from tests.support.cli import child_env
from tests.support.kafka import drop_topics, topic_settings
from tests.support.processes import start
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults


def _health(url: str) -> tuple[int, dict[str, Any]]:
    answer = httpx.get(url + "/healthz", timeout=5)
    return answer.status_code, answer.json()


def _serving(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    aggregator = start(["aggregator", "--http", "127.0.0.1:0"], env)
    assert aggregator.stdout is not None
    return aggregator, aggregator.stdout.readline().split()[-1]


def _stop(aggregator: subprocess.Popen[str]) -> None:
    aggregator.send_signal(signal.SIGTERM)
    aggregator.communicate(timeout=60)


def test_an_aggregator_holding_no_partition_is_not_ready(kafka_bootstrap: str) -> None:
    settings = topic_settings(kafka_bootstrap, partitions=1)
    env = child_env(settings)
    first, first_url = _serving(env)
    second: subprocess.Popen[str] | None = None
    try:
        wait_for(lambda: _health(first_url)[0] == 200, "the first aggregator ready")
        second, second_url = _serving(env)
        # The group's one partition stays with the first: the second serves nothing.
        code, body = wait_for(
            lambda: (found := _health(second_url))[1]["status"] == "idle" and found, "idle"
        )
        assert code == 503 and body["ready"] is False and body["partitions"] == {}
        _stop(first)
        wait_for(lambda: _health(second_url)[0] == 200, "the second to take the partition over")
        assert list(_health(second_url)[1]["partitions"]) == ["0"]
    finally:
        for aggregator in (first, second):
            if aggregator is not None and aggregator.poll() is None:
                _stop(aggregator)
        drop_topics(settings)


def test_losing_every_partition_makes_a_member_not_ready_until_it_is_assigned_again() -> None:
    state = AggregatorState(num_partitions=2)
    state.running, state.joined = True, True
    state.assign(0, 0, 0)
    assert state.health().ready
    state.revoke(0)  # a broker restart: the partitions are lost during a rebuild
    assert not state.health().ready and state.health().status == "starting"
    state.joined = True  # the next assignment, still empty
    assert not state.health().ready and state.health().status == "idle"
