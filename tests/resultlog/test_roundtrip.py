"""A produce/read round trip through the durable (idempotent, acks=all) producer."""

from __future__ import annotations

from confluent_kafka import KafkaError, Message

from resultlog.kafka import KafkaConnection, produce
from resultlog.settings import Settings
from tests.support.kafka import read_partition


def test_durable_producer_round_trip(settings: Settings, kafka: KafkaConnection) -> None:
    producer = kafka.durable_producer()
    reports: list[KafkaError | None] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        reports.append(error)

    sent = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(50)]
    for key, value in sent:
        produce(producer, kafka.results_topic, key, value, partition=1, on_delivery=delivered)
    assert producer.flush(30) == 0
    assert reports == [None] * 50

    received = read_partition(settings, kafka.results_topic, 1)
    assert [(m.key, m.value) for m in received] == sent
    assert [m.offset for m in received] == list(range(50))  # each once, in order
    assert all(not read_partition(settings, kafka.results_topic, p) for p in (0, 2))
