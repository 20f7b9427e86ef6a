"""Topic creation against the real broker, read back with describe_configs."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from resultlog.errors import TopicError
from resultlog.kafka import KafkaConnection
from resultlog.settings import Settings
from resultlog.topics import ensure_topics, topic_specs


def _config(admin: AdminClient, topic: str) -> dict[str, str]:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return {name: entry.value for name, entry in entries.items()}


def _kafka(kafka_bootstrap: str, unique_name: str, partitions: int) -> KafkaConnection:
    return KafkaConnection(_settings(kafka_bootstrap, unique_name, partitions))


def _settings(kafka_bootstrap: str, unique_name: str, partitions: int) -> Settings:
    """Settings of topics not created yet."""
    return Settings(
        bootstrap_servers=kafka_bootstrap,
        partitions=partitions,
    ).namespaced(unique_name)


def test_creates_five_topics_with_their_configs_idempotently(
    admin: AdminClient, kafka_bootstrap: str, unique_name: str
) -> None:
    settings = _settings(kafka_bootstrap, unique_name, partitions=4)
    first = ensure_topics(KafkaConnection(settings), topic_specs(settings))
    # results, summaries, DLQ, leases, spend ledger, checkpoints, run index, lm-eval
    # answers, work x2
    assert [o.created for o in first] == [True] * 10
    again = ensure_topics(KafkaConnection(settings), topic_specs(settings))
    assert [o.created for o in again] == [False] * 10

    metadata = admin.list_topics(timeout=10).topics
    for name in settings.topic_names():
        assert len(metadata[name].partitions) == 4
    assert _config(admin, settings.results_topic)["cleanup.policy"] == "compact"
    assert _config(admin, settings.summaries_topic)["cleanup.policy"] == "compact"
    assert _config(admin, settings.dlq_topic)["cleanup.policy"] == "delete"
    assert _config(admin, settings.results_topic)["min.insync.replicas"] == "1"
    assert _config(admin, settings.leases_topic)["cleanup.policy"] == "compact"
    assert _config(admin, settings.spend_topic)["cleanup.policy"] == "compact"
    assert _config(admin, settings.changelog_topic)["cleanup.policy"] == "compact"
    assert _config(admin, settings.index_topic)["cleanup.policy"] == "compact"
    assert len(metadata[settings.index_topic].partitions) == 4
    assert _config(admin, settings.lm_eval_answers_topic)["cleanup.policy"] == "compact"
    assert len(metadata[settings.lm_eval_answers_topic].partitions) == 4
    assert _config(admin, settings.results_topic)["max.message.bytes"] == str(8 * 1024 * 1024)


def test_existing_topic_with_wrong_cleanup_policy_is_refused(
    admin: AdminClient, kafka_bootstrap: str, unique_name: str
) -> None:
    settings = _settings(kafka_bootstrap, unique_name, partitions=2)
    wrong = NewTopic(settings.results_topic, 2, 1, config={"cleanup.policy": "delete"})
    admin.create_topics([wrong])[settings.results_topic].result(timeout=30)
    with pytest.raises(TopicError, match=r"cleanup.policy=delete but must be compact"):
        ensure_topics(KafkaConnection(settings), topic_specs(settings))


def test_existing_topic_with_other_partition_count_is_refused(
    admin: AdminClient, kafka_bootstrap: str, unique_name: str
) -> None:
    ensure_topics(_kafka(kafka_bootstrap, unique_name, partitions=2))
    with pytest.raises(TopicError, match="exists with 2 partitions but the settings say 5"):
        ensure_topics(_kafka(kafka_bootstrap, unique_name, partitions=5))
