"""A three-broker cluster (`kafka up --brokers 3`): the leader of a run's partition killed mid-run.

Topics have replication factor 3 and min.insync.replicas 2; with acks=all and an idempotent
producer the run completes with every record exactly once.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigEntry, ConfigResource, TopicMetadata

from resultlog.broker import LocalKafka
from resultlog.producer import Progress
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey
from tests.support.audit import all_pairs, audit, report
from tests.support.cli import cli_argv
from tests.support.kafka import run_partition, topic_settings
from tests.support.runs import MODEL, run_once
from tests.support.summaries import bare, expected
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

SAMPLES, EPOCHS = 40, 2


def _up_three(directory: Path) -> str:
    done = subprocess.run(
        cli_argv("kafka", "up", "--brokers", "3", "--port", "0", "--dir", str(directory)),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _described(admin: AdminClient, resource: ConfigResource) -> dict[str, ConfigEntry]:
    """The topic's configs, once the broker asked has caught up with the new topic."""
    deadline = time.monotonic() + 30
    while True:
        try:
            configs: dict[str, ConfigEntry] = admin.describe_configs([resource])[resource].result()
            return configs
        except KafkaException as exc:
            lagging = exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            if not lagging or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


async def test_killing_the_partition_leader_mid_run_loses_nothing(kafka_dir: Path) -> None:
    bootstrap = _up_three(kafka_dir)
    kafka = LocalKafka(kafka_dir)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert len(bootstrap.split(",")) == 3
    assert len(admin.list_topics(timeout=10).brokers) == 3

    settings = topic_settings(bootstrap, replication_factor=3, min_insync_replicas=2)

    def described() -> TopicMetadata | None:
        # A new topic's metadata can list some of its partitions first: wait for all.
        found = admin.list_topics(settings.results_topic, timeout=10).topics
        topic = found.get(settings.results_topic)
        whole = topic is not None and len(topic.partitions) == settings.partitions
        return topic if whole else None

    topic = wait_for(described, "every partition of the results topic in the metadata")
    assert all(len(p.replicas) == 3 for p in topic.partitions.values())
    resource = ConfigResource(ConfigResource.Type.TOPIC, settings.results_topic)
    configs = _described(admin, resource)
    assert configs["min.insync.replicas"].value == "2"

    bench = limit_samples(arith(), SAMPLES)
    run_key = RunKey("cluster", bench.name, MODEL)
    leader = topic.partitions[run_partition(settings, run_key)].leader
    killer: list[threading.Thread] = []

    def kill_leader(progress: Progress) -> None:
        if not killer and progress.done >= progress.total // 3:
            killer.append(
                threading.Thread(target=kafka.stop_node, args=(leader,), kwargs={"kill": True})
            )
            killer[0].start()

    with ModelServer(latency_s=0.05) as server:
        result = await run_once(
            settings,
            bench,
            "cluster",
            server.base_url,
            epochs=EPOCHS,
            # Longer than the failover (the dead node is fenced after 3 s, then a new leader).
            delivery_timeout_ms=15_000,
            on_progress=kill_leader,
        )
    killer[0].join()

    metadata = admin.list_topics(settings.results_topic, timeout=10)
    assert leader not in metadata.brokers, "the leader was not killed"
    new_leader = metadata.topics[settings.results_topic].partitions[
        run_partition(settings, run_key)
    ]
    found = audit(settings, run_key, all_pairs(SAMPLES, EPOCHS))
    wrong = int(bare(result.summary) != expected(settings, run_key))
    report(
        "cluster-3",
        killed=leader,
        new_leader=new_leader.leader,
        isr=list(new_leader.isrs),
        lost=found.lost,
        duplicates=found.duplicates,
        raw=found.raw,
        wrong_summaries=wrong,
    )
    assert found.clean, found
    assert found.latest == result.summary.records == SAMPLES * EPOCHS
    assert wrong == 0
