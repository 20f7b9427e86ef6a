"""Leases on run keys (design rule 18): one live holder per overlapping range, log order wins;
a claim reads its partition once."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from resultlog.kafka import KafkaConnection
from resultlog.producer import LeaseHeldError, RunLease, claim_lease, live_leases
from resultlog.producer.lease import _read_leases
from resultlog.schemas import RunKey, partition_for, run_key_prefix
from resultlog.settings import Settings
from tests.producer.leases import foreign_lease, write_lease

RUN_KEY = RunKey("lease-run", "arith", "openai/gpt-4o")
TRIALS = 10
CLAIMANTS = 4


def test_an_overlapping_claim_is_refused_naming_the_holder(kafka: KafkaConnection) -> None:
    with claim_lease(kafka, RUN_KEY, (0, 100)):
        with pytest.raises(LeaseHeldError) as refused:
            claim_lease(kafka, RUN_KEY, (50, 150))
        message = str(refused.value)
        assert "\n" not in message
        assert f"leased by host {refused.value.holder.host} pid {os.getpid()} since" in message
        assert re.search(r"expires in \d+s", message), message
        # A disjoint range of the same run key (another chunk) is no conflict.
        with claim_lease(kafka, RUN_KEY, (100, 200)):
            assert [(lease.start, lease.end) for lease in live_leases(kafka, RUN_KEY)] == [
                (0, 100),
                (100, 200),
            ]
    assert live_leases(kafka, RUN_KEY) == []
    claim_lease(kafka, RUN_KEY, (0, 100)).release()  # released: free again


def race(kafka: KafkaConnection, run_key: RunKey) -> list[RunLease | LeaseHeldError]:
    """CLAIMANTS threads claiming the same range at once."""
    start = threading.Barrier(CLAIMANTS)
    outcomes: list[RunLease | LeaseHeldError] = []

    def claim() -> None:
        start.wait()
        try:
            outcomes.append(claim_lease(kafka, run_key, (0, 10)))
        except LeaseHeldError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=claim) for _ in range(CLAIMANTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def test_of_simultaneous_claimants_exactly_one_wins(kafka: KafkaConnection) -> None:
    for trial in range(TRIALS):
        run_key = RunKey(f"race-{trial}", "arith", "m")
        outcomes = race(kafka, run_key)
        holders = [outcome for outcome in outcomes if isinstance(outcome, RunLease)]
        assert len(holders) == 1, outcomes
        assert [lease.token for lease in live_leases(kafka, run_key)] == [holders[0].lease.token]
        holders[0].release()


@pytest.mark.slow  # waits out a lease's time to live
def test_a_lease_from_another_machine_blocks_until_it_expires(
    settings: Settings, kafka: KafkaConnection
) -> None:
    crashed = write_lease(settings, RUN_KEY, foreign_lease(ttl_s=5.0))
    with pytest.raises(LeaseHeldError, match="leased by host worker-7 pid 4242"):
        claim_lease(kafka, RUN_KEY, (10, 20))
    time.sleep(max(0.0, crashed.expires_ms / 1000 - time.time()) + 0.1)
    claim_lease(kafka, RUN_KEY, (10, 20)).release()
    foreign_key = run_key_prefix(RUN_KEY) + b"f" * 16
    assert latest_values(settings)[foreign_key] is None, "the winner deletes expired leases"


def latest_values(settings: Settings) -> dict[bytes, bytes | None]:
    """The latest value of every key in the leases topic's partition of RUN_KEY."""
    consumer = Consumer(
        {**settings.client_config(), "group.id": "leases", "enable.partition.eof": True}
    )
    partition = partition_for(RUN_KEY, settings.partitions)
    consumer.assign([TopicPartition(settings.leases_topic, partition, 0)])
    found: dict[bytes, bytes | None] = {}
    while (message := consumer.poll(10)) is not None and message.error() is None:
        found[message.key() or b""] = message.value()
    consumer.close()
    return found


def test_a_dead_holder_on_this_machine_does_not_block(
    settings: Settings, kafka: KafkaConnection
) -> None:
    code = "import os; print(os.getpid())"
    child = subprocess.run([sys.executable, "-c", code], text=True, capture_output=True, check=True)
    mine = claim_lease(kafka, RunKey("probe", "arith", "m"), (0, 1))
    identity = mine.lease.process
    mine.release()
    assert identity is not None, "Linux records who holds a lease"
    boot_ns = identity.rpartition("/")[0]
    dead = foreign_lease(ttl_s=60, process=f"{boot_ns}/12345", pid=int(child.stdout))
    write_lease(settings, RUN_KEY, dead)
    claim_lease(kafka, RUN_KEY, (0, 100)).release()  # its pid is gone: no need to wait


@pytest.mark.slow  # waits out a lease's time to live
def test_the_holder_renews_its_lease_past_the_time_to_live(kafka: KafkaConnection) -> None:
    # A renewal first reads the fence through a fresh consumer: under CI's load one took
    # longer than a 1 s lease allows, and the lease expired.
    with claim_lease(kafka, RUN_KEY, (0, 100), ttl_s=3.0) as held:
        time.sleep(7.5)
        assert [lease.token for lease in live_leases(kafka, RUN_KEY)] == [held.lease.token]
        with pytest.raises(LeaseHeldError):
            claim_lease(kafka, RUN_KEY, (0, 1))


def test_leases_read_since_a_first_read_match_a_whole_read(kafka: KafkaConnection) -> None:
    settings = kafka.settings
    topic, partition = settings.leases_topic, partition_for(RUN_KEY, settings.partitions)
    write_lease(settings, RUN_KEY, foreign_lease(60, start=0, end=10))
    first = _read_leases(kafka, topic, partition, RUN_KEY)
    assert len(first.leases) == 1
    later = foreign_lease(60, start=10, end=20).model_copy(update={"token": "e" * 16})
    write_lease(settings, RUN_KEY, later)
    since = _read_leases(kafka, topic, partition, RUN_KEY, first)
    whole = _read_leases(kafka, topic, partition, RUN_KEY)
    assert since == whole
    assert since.end > first.end and len(since.leases) == 2
