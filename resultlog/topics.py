"""Create the resultlog topics idempotently and refuse ones that contradict the settings."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ClusterMetadata,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from resultlog.errors import KafkaClientError, TopicError
from resultlog.kafka import KafkaConnection, topic_layouts
from resultlog.settings import Settings

__all__ = ["TopicOutcome", "TopicSpec", "ensure_topics", "topic_config", "topic_specs"]

_TIMEOUT_S = 30.0
# Leases are renewed every few seconds: short segments let compaction keep the topic small,
# so a claim (which reads the run key's partition) stays quick.
_LEASES_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": str(10 * 60 * 1000),
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": str(60 * 60 * 1000),
}

# The changelog keeps each store key's latest value: short segments let compaction keep it
# near the size of the state, so a restore reads little more than the state. Its tombstones
# stay as long as Kafka's default (a day), like the results topic's.
_CHANGELOG_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": str(10 * 60 * 1000),
    "segment.bytes": str(64 * 1024 * 1024),
    "min.cleanable.dirty.ratio": "0.1",
}

# Index entries are rewritten as their runs grow: a reader of one run reads its whole index
# partition, so small segments keep it near one entry per run.
_INDEX_CONFIG = {**_LEASES_CONFIG, "segment.bytes": str(8 * 1024 * 1024)}


@dataclass(frozen=True)
class TopicSpec:
    """What one topic must look like."""

    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, str] = field(default_factory=dict)
    # The results and summaries partitions are part of the wire contract; the work topic's
    # only bound how many workers are useful, so an operator may grow them.
    exact_partitions: bool = True


@dataclass(frozen=True)
class TopicOutcome:
    """What `ensure_topics` did for one topic."""

    name: str
    created: bool


def topic_specs(
    settings: Settings, extra_config: Mapping[str, str] | None = None
) -> list[TopicSpec]:
    """The Kafka layout (docs/design.md): `resultlog.kafka.topic_layouts`, then the work topics.

    Results (and the DLQ, which copies them) accept messages up to the settings'
    `max_message_bytes` after compression; leases get short segments; the work topic and its
    dead letters delete, and may be grown (their partitions bound the useful worker count).
    """
    base = {"min.insync.replicas": str(settings.min_insync_replicas), **(extra_config or {})}
    large = {"max.message.bytes": str(settings.max_message_bytes)}
    own = {
        settings.results_topic: large,
        settings.dlq_topic: large,
        settings.lm_eval_answers_topic: large,
    }
    own[settings.leases_topic] = _LEASES_CONFIG
    own[settings.spend_topic] = _LEASES_CONFIG  # rewritten per pair, read per chunk: keep small
    own[settings.changelog_topic] = _CHANGELOG_CONFIG
    own[settings.index_topic] = _INDEX_CONFIG
    replicas = settings.replication_factor
    deleting = {**base, "cleanup.policy": "delete"}
    work = [
        TopicSpec(name, settings.work_partitions, replicas, deleting, exact_partitions=False)
        for name in (settings.work_topic, settings.work_dlq_topic)
    ]
    return [
        *(
            TopicSpec(
                name,
                layout.partitions,
                replicas,
                config={**own.get(name, {}), **base, "cleanup.policy": layout.cleanup_policy},
            )
            for name, layout in topic_layouts(settings).items()
        ),
        *work,
    ]


def topic_config(kafka: KafkaConnection, name: str) -> dict[str, str]:
    """The effective configuration of an existing topic (its own settings and the broker's)."""
    admin = kafka.admin()
    entries = _describe(admin, ConfigResource(ConfigResource.Type.TOPIC, name))
    return {key: entry.value for key, entry in entries.items() if entry.value is not None}


def ensure_topics(
    kafka: KafkaConnection,
    specs: list[TopicSpec] | None = None,
    *,
    timeout_s: float = _TIMEOUT_S,
) -> list[TopicOutcome]:
    """Create missing topics (default: the settings' five); check existing ones against spec.

    `timeout_s` bounds the wait for a new topic to reach the broker's metadata: a busy
    combined controller and broker may answer "unknown topic" for seconds after creating it.
    """
    specs = specs if specs is not None else topic_specs(kafka.settings)
    try:
        kafka.check_connection()
    except KafkaClientError as exc:
        raise TopicError(str(exc)) from exc
    admin = kafka.admin()
    existing = _metadata(admin).topics
    created = _create(admin, [spec for spec in specs if spec.name not in existing])
    to_check = [spec for spec in specs if spec.name not in created]
    for spec in specs:
        known = existing.get(spec.name)
        # New topics (ours or a racing client's) are polled until clients can find leaders.
        count = (
            len(known.partitions)
            if known
            else _new_partition_count(kafka, admin, spec.name, timeout_s)
        )
        _check_partitions(spec, count)
    _check_cleanup_policies(admin, to_check)
    return [TopicOutcome(spec.name, created=spec.name in created) for spec in specs]


def _metadata(admin: AdminClient) -> ClusterMetadata:
    try:
        return admin.list_topics(timeout=_TIMEOUT_S)
    except KafkaException as exc:
        raise TopicError(f"cannot read topic metadata: {exc.args[0]}") from exc


def _new_partition_count(
    kafka: KafkaConnection, admin: AdminClient, name: str, timeout_s: float
) -> int:
    # A topic another client just created may lag in this broker's metadata cache.
    try:
        return kafka.partition_count(name, admin, created=True, timeout_s=timeout_s)
    except KafkaClientError as exc:
        raise TopicError(str(exc)) from exc


def _create(admin: AdminClient, specs: list[TopicSpec]) -> set[str]:
    if not specs:
        return set()
    new_topics = [
        NewTopic(s.name, s.partitions, s.replication_factor, config=dict(s.config)) for s in specs
    ]
    created = set()
    for name, future in admin.create_topics(new_topics, request_timeout=_TIMEOUT_S).items():
        try:
            future.result()
        except KafkaException as exc:
            error = exc.args[0]
            # Another client may have created it since we listed; it is checked like the rest.
            if error.code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise TopicError(f"cannot create topic {name}: {error.str()}") from exc
        else:
            created.add(name)
    return created


def _check_partitions(spec: TopicSpec, actual: int) -> None:
    if spec.exact_partitions and actual != spec.partitions:
        raise TopicError(
            f"topic {spec.name} exists with {actual} partitions but the settings say "
            f"{spec.partitions}; run keys would map to other partitions"
        )


def _describe(admin: AdminClient, resource: ConfigResource) -> dict[str, ConfigEntry]:
    # In a cluster, the broker asked may not know a topic another broker just created.
    deadline = time.monotonic() + _TIMEOUT_S
    while True:
        future = admin.describe_configs([resource], request_timeout=_TIMEOUT_S)[resource]
        try:
            return future.result()  # type: ignore[no-any-return]
        except KafkaException as exc:
            error = exc.args[0]
            if error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART or time.monotonic() > deadline:
                raise TopicError(f"cannot describe topic {resource.name}: {error}") from exc
            time.sleep(0.2)


def _check_cleanup_policies(admin: AdminClient, specs: list[TopicSpec]) -> None:
    if not specs:
        return
    resources = [ConfigResource(ConfigResource.Type.TOPIC, spec.name) for spec in specs]
    wanted = {spec.name: spec.config.get("cleanup.policy") for spec in specs}
    for resource in resources:
        entries = _describe(admin, resource)
        actual = entries["cleanup.policy"].value or ""
        expected = wanted[resource.name]
        if expected is not None and set(actual.split(",")) != set(expected.split(",")):
            raise TopicError(
                f"topic {resource.name} exists with cleanup.policy={actual} but must be {expected}"
            )
