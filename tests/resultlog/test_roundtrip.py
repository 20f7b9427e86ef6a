"""A produce/consume round trip with an idempotent acks=all producer."""

from __future__ import annotations

from confluent_kafka import Consumer, KafkaError, Message, Producer

from resultlog.settings import Settings


def test_idempotent_producer_round_trip(settings: Settings, unique_name: str) -> None:
    producer = Producer({**settings.client_config(), "enable.idempotence": True, "acks": "all"})
    reports: list[tuple[KafkaError | None, Message]] = []
    sent = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(50)]
    for key, value in sent:
        producer.produce(
            settings.results_topic,
            key=key,
            value=value,
            partition=1,
            on_delivery=lambda err, msg: reports.append((err, msg)),
        )
    assert producer.flush(30) == 0
    assert [err for err, _ in reports] == [None] * 50

    consumer = Consumer(
        {
            **settings.client_config(),
            "group.id": unique_name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([settings.results_topic])
    received: list[tuple[bytes, bytes]] = []
    for _ in range(100):
        if len(received) == len(sent):
            break
        for message in consumer.consume(num_messages=100, timeout=1.0):
            assert message.error() is None
            assert message.partition() == 1
            received.append((message.key(), message.value()))
    consumer.close()
    assert received == sent
