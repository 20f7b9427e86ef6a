"""The work topic and its dead letters: created with the others, growable, group offsets read."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions

from resultlog.kafka import KafkaConnection
from resultlog.settings import Settings
from resultlog.topics import ensure_topics


def _config(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {name: entry.value for name, entry in entries.items()}


def test_defaults_name_the_work_topics() -> None:
    settings = Settings(_env_file=None)  # type: ignore[call-arg]  # pydantic-settings runtime option
    assert settings.work_topic == "resultlog.work"
    assert settings.work_dlq_topic == "resultlog.work.dlq"
    assert settings.work_group == "resultlog-workers"
    assert settings.work_partitions == 6


def test_work_topics_delete_and_may_grow(
    admin: AdminClient, kafka_bootstrap: str, unique_name: str
) -> None:
    settings = Settings(
        bootstrap_servers=kafka_bootstrap,
        partitions=2,
        work_partitions=4,
    ).namespaced(unique_name)
    created = ensure_topics(KafkaConnection(settings))
    assert {o.name for o in created if o.created} >= {settings.work_topic, settings.work_dlq_topic}
    metadata = admin.list_topics(timeout=10).topics
    for topic in (settings.work_topic, settings.work_dlq_topic):
        assert len(metadata[topic].partitions) == 4
        assert _config(admin, topic)["cleanup.policy"] == "delete"

    # More workers want more partitions: growing the work topic is no contradiction.
    grow = admin.create_partitions([NewPartitions(settings.work_topic, 8)])
    grow[settings.work_topic].result(timeout=30)
    again = ensure_topics(KafkaConnection(settings))
    assert not any(o.created for o in again)


def test_committed_offsets_of_a_group(kafka: KafkaConnection, unique_name: str) -> None:
    topic, group = kafka.work_topic, f"{unique_name}.group"
    assert kafka.committed_offsets(group, topic, [0, 1, 2]) == {}
    consumer = Consumer({**kafka.settings.client_config(), "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 1, 5)], asynchronous=False)
    finally:
        consumer.close()
    assert kafka.committed_offsets(group, topic, [0, 1, 2]) == {1: 5}
    assert kafka.committed_offsets(group, topic, []) == {}
