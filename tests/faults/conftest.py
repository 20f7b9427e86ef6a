"""Fixtures of the fault tier: brokers of its own that tests may stop, kill and restart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from resultlog.broker import LocalKafka
from resultlog.settings import Settings
from tests.support.kafka import topic_settings


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
    yield topic_settings(restartable_kafka.bootstrap)
    restartable_kafka.start_node(1)
