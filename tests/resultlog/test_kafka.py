"""The Kafka boundary: client configuration, the one partition count, backpressure, closing."""

from __future__ import annotations

import socket

import pytest
from confluent_kafka import KafkaError, Message

from resultlog.kafka import LIBRDKAFKA_LOGGER, KafkaClientError, KafkaConnection, produce
from resultlog.schemas import Codec, WireFormat
from resultlog.settings import Settings
from tests.support.imports import modules_loaded_by


def unreachable() -> KafkaConnection:
    """A connection to a port nothing listens on."""
    return KafkaConnection(Settings(bootstrap_servers="127.0.0.1:1"))


def test_config_is_the_settings_then_our_logger_then_the_overrides(settings: Settings) -> None:
    config = KafkaConnection(settings).config({"linger.ms": 7, "client.id": "other"})
    assert config == {
        **settings.client_config(),
        "logger": LIBRDKAFKA_LOGGER,
        "linger.ms": 7,
        "client.id": "other",
    }


def test_topic_names_and_codec_come_from_the_settings(settings: Settings) -> None:
    kafka = KafkaConnection(settings)
    assert (kafka.results_topic, kafka.summaries_topic, kafka.dlq_topic) == (settings.topic_names())
    assert kafka.codec.wire_format is WireFormat.SINGLE_OBJECT
    framed = settings.model_copy(update={"schema_registry_url": "mock://boundary"})
    with KafkaConnection(framed) as registered:
        assert registered.codec.wire_format is WireFormat.REGISTRY


def test_closing_the_connection_closes_its_codec(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    codec = Codec()
    closed: list[bool] = []
    monkeypatch.setattr(codec, "close", lambda: closed.append(True))
    with KafkaConnection(settings, codec) as kafka:
        assert kafka.codec is codec
        assert not closed
    assert closed == [True]


def test_partition_count_of_each_topic(kafka: KafkaConnection, settings: Settings) -> None:
    for topic in settings.topic_names():
        assert kafka.partition_count(topic) == settings.partitions
        assert kafka.partition_count(topic, kafka.reader()) == settings.partitions
        assert kafka.partition_count(topic, kafka.durable_producer()) == settings.partitions


def test_a_missing_topic_is_a_one_line_error(kafka: KafkaConnection) -> None:
    missing = f"nope.{kafka.results_topic}"
    expected = f"topic {missing} does not exist; run `resultlog topics create`"
    with pytest.raises(KafkaClientError) as raised:
        kafka.partition_count(missing, kafka.reader())
    assert str(raised.value) == expected


def test_an_unreachable_broker_is_a_one_line_error() -> None:
    with pytest.raises(KafkaClientError, match=r"^cannot reach Kafka at 127\.0\.0\.1:1: "):
        unreachable().partition_count("any", timeout_s=1.0)


def test_a_broker_that_never_answers_a_topic_id_look_up_is_a_client_error() -> None:
    # Found by the soak (seed 1425635947): during a broker outage the look-up's future ran
    # out before its request did, and a bare TimeoutError stopped the aggregator.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections, never answers a request
        port = silent.getsockname()[1]
        silent_kafka = KafkaConnection(Settings(bootstrap_servers=f"127.0.0.1:{port}"))
        with silent_kafka, pytest.raises(KafkaClientError, match="cannot describe results: "):
            silent_kafka.topic_identity("results", timeout_s=1.0)


def test_the_durable_producer_delivers(kafka: KafkaConnection) -> None:
    reports: list[KafkaError | None] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        reports.append(error)

    producer = kafka.durable_producer()
    for index in range(20):
        produce(producer, kafka.dlq_topic, b"k%d" % index, b"v", on_delivery=delivered)
    assert producer.flush(30) == 0
    assert reports == [None] * 20


def test_a_full_local_queue_waits_then_fails_clearly() -> None:
    producer = unreachable().durable_producer({"queue.buffering.max.messages": 1, "log_level": 0})
    produce(producer, "t", b"k", b"first", partition=0)
    with pytest.raises(
        KafkaClientError, match=r"local queue of messages for t stayed full for 0\.3s"
    ):
        produce(producer, "t", b"k", b"second", partition=0, wait_s=0.3)


def test_a_refused_produce_is_a_boundary_error() -> None:
    producer = unreachable().durable_producer({"message.max.bytes": 1000, "log_level": 0})
    with pytest.raises(KafkaClientError, match="too large"):
        produce(producer, "t", b"k", b"x" * 5000, partition=0)


@pytest.mark.parametrize("package", ["resultlog.producer", "resultlog.consumers"])
def test_importing_the_worker_or_the_readers_loads_no_web_stack(package: str) -> None:
    heavy = ("prometheus_client", "starlette", "uvicorn")
    loaded = modules_loaded_by(package)
    assert package in loaded and not set(heavy) & loaded


def test_the_aggregator_is_still_reachable_from_the_readers_package() -> None:
    from resultlog import consumers
    from resultlog.consumers.aggregator import Aggregator

    assert consumers.Aggregator is Aggregator
