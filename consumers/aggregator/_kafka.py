"""The aggregator's group-member settings, and watermark queries that wait out blips."""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import ConfigResource

from resultlog.consumers._scan import watermark_offsets
from resultlog.kafka import KafkaConnection

__all__ = ["consumer_overrides", "delete_retention_ms", "watermarks"]

log = logging.getLogger(__name__)
_WATERMARK_TIMEOUT_S = 30.0
_DEFAULT_DELETE_RETENTION_MS = 24 * 60 * 60 * 1000  # Kafka's default


def consumer_overrides(session_timeout_ms: int, instance_id: str | None) -> dict[str, Any]:
    """Group member settings: nothing committed, cooperative assignment, end-of-partition events."""
    overrides: dict[str, Any] = {
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "cooperative-sticky",
        "enable.partition.eof": True,
        "session.timeout.ms": session_timeout_ms,
        # Frequent heartbeats: members learn of a rebalance (two rounds when cooperative)
        # sooner, so a joining or leaving instance settles in about a second.
        "heartbeat.interval.ms": min(500, max(100, session_timeout_ms // 10)),
        # A fetch the broker holds back waits up to fetch.wait.max.ms (500 ms by default) even
        # when records arrive meanwhile (measured: 1 record in ~10 seen 250-500 ms late).
        "fetch.wait.max.ms": 10,
        # Bounded read-ahead: compressed fetches are decompressed into the local queue, so
        # librdkafka's defaults (64 MB fetched, 64 MB queued, 100k messages per partition)
        # held hundreds of MB of a backlog, an RSS high-water mark that grew with the log.
        "fetch.max.bytes": 8 * 1024 * 1024,
        "max.partition.fetch.bytes": 2 * 1024 * 1024,
        "queued.max.messages.kbytes": 8192,
        "queued.min.messages": 5000,
        # Once that queue is full, librdkafka fetches again only after fetch.queue.backoff.ms
        # (1 s by default): a consumer that keeps up then reads in bursts a second apart, so
        # every record waited up to a second and the fold idled between bursts.
        "fetch.queue.backoff.ms": 10,
    }
    if instance_id is not None:
        # Static membership: a restarted instance takes its partitions back at once.
        overrides["group.instance.id"] = instance_id
    return overrides


def watermarks(consumer: Consumer, topic: str, partition: int) -> tuple[int, int | None]:
    """Low and high watermarks; high None if the broker did not answer (read to the end)."""
    try:
        return watermark_offsets(consumer, TopicPartition(topic, partition), _WATERMARK_TIMEOUT_S)
    except KafkaException as exc:
        log.warning("no watermarks for %s[%d] (%s)", topic, partition, exc.args[0])
        return 0, None


def delete_retention_ms(kafka: KafkaConnection, topic: str | None = None) -> int:
    """How long a topic (the results topic by default) keeps tombstones, as the broker says:
    state saved longer ago may have missed a delete."""
    topic = topic or kafka.results_topic
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = kafka.admin()
    try:
        entries = admin.describe_configs([resource], request_timeout=10.0)[resource].result(10.0)
        return int(entries["delete.retention.ms"].value)
    except Exception as exc:  # an ACL may deny DESCRIBE_CONFIGS: Kafka's default then
        log.debug("cannot read delete.retention.ms of %s: %s", topic, exc)
        return _DEFAULT_DELETE_RETENTION_MS
