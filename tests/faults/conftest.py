"""Fixtures of the fault tier: brokers of its own that tests may stop, kill and restart."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from resultlog.broker import LocalKafka
from resultlog.kafka import KafkaConnection
from resultlog.settings import Settings
from resultlog.topics import ensure_topics, topic_specs


def make_settings(bootstrap: str, **fields: Any) -> Settings:
    """Settings with freshly created topics of their own on `bootstrap`."""
    name = f"f{uuid.uuid4().hex[:12]}"
    extra_config = fields.pop("extra_config", None)
    settings = Settings(
        bootstrap_servers=bootstrap,
        results_topic=f"{name}.sample-results",
        summaries_topic=f"{name}.run-summaries",
        dlq_topic=f"{name}.sample-results.dlq",
        aggregator_group=f"{name}.aggregator",
        **{"partitions": 3, **fields},
    )
    ensure_topics(KafkaConnection(settings), topic_specs(settings, extra_config))
    return settings


@pytest.fixture(scope="module")
def restartable_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    """A single-node broker of the module alone: its tests stop and restart it."""
    kafka = LocalKafka(tmp_path_factory.mktemp("restartable-kafka"))
    kafka.up(port=0)
    yield kafka
    kafka.down()


@pytest.fixture
def restartable_settings(restartable_kafka: LocalKafka) -> Iterator[Settings]:
    """Fresh topics on the restartable broker; the broker is serving again after the test."""
    yield make_settings(restartable_kafka.bootstrap)
    restartable_kafka.start_node(1)
