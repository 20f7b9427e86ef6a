"""An unreachable broker: every command fails with one readable line within seconds."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from resultlog.kafka import UNREACHABLE_S, KafkaClientError, KafkaConnection
from resultlog.settings import Settings
from tests.support.cli import child_env

RUN_KEY = ["--run-id", "r", "--benchmark", "arith", "--model", "m"]
COMMANDS = {
    "run": ["run", "arith", "--model", "m", "--run-id", "r", "--limit", "2"],
    "status": ["status", *RUN_KEY],
    "replay": ["replay", *RUN_KEY],
    "purge": ["purge", *RUN_KEY],
    "topics create": ["topics", "create"],
    "aggregator": ["aggregator", "--http", "127.0.0.1:0"],
}
UNREACHABLE = {
    "refused": ("127.0.0.1:1", "Connect to ipv4#127.0.0.1:1 failed: Connection refused"),
    "unresolvable": (
        "no-such-host.invalid:9092",
        "Failed to resolve 'no-such-host.invalid:9092'",
    ),
}
# Six interpreters starting at once on a busy 2-core machine (about 5 s each alone, 30 s
# seen at load 9): this bound only tells "gave up" from "hangs"; the check's own budget
# is asserted tightly below.
WALL_LIMIT_S = 50.0


@pytest.mark.parametrize("case", sorted(UNREACHABLE))
def test_every_command_fails_in_seconds_with_one_line(case: str) -> None:
    servers, reason = UNREACHABLE[case]
    env = child_env(Settings(bootstrap_servers=servers))
    started = time.monotonic()
    processes = {
        name: subprocess.Popen(
            [sys.executable, "-m", "resultlog.cli", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, args in COMMANDS.items()
    }
    took: dict[str, float] = {}
    for name, process in processes.items():
        stdout, stderr = process.communicate(timeout=60)
        took[name] = time.monotonic() - started
        assert process.returncode == 1, (name, stdout, stderr)
        assert stderr.count("\n") == 1, (name, stderr)
        assert stderr.startswith(f"resultlog: error: cannot reach Kafka at {servers}: "), stderr
        assert reason in stderr and "KafkaError{" not in stderr, (name, stderr)
    slowest = max(took.values())
    print(f"FAULT-TABLE unreachable-{case}: commands={len(took)} slowest_s={slowest:.1f}")
    assert slowest < WALL_LIMIT_S, took


def test_the_check_gives_up_after_its_budget() -> None:
    kafka = KafkaConnection(Settings(bootstrap_servers="127.0.0.1:1"))
    started = time.monotonic()
    with pytest.raises(KafkaClientError, match=r"^cannot reach Kafka at 127\.0\.0\.1:1: Connect"):
        kafka.check_connection()
    assert UNREACHABLE_S <= time.monotonic() - started < UNREACHABLE_S + 2.0


def test_a_reachable_broker_is_checked_once(kafka: KafkaConnection) -> None:
    kafka.check_connection()
    started = time.monotonic()
    kafka.check_connection()
    kafka.partition_count(kafka.results_topic)
    assert time.monotonic() - started < 1.0
