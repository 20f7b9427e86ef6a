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

from resultlog._topic_table import TOPICS, Topic
from resultlog.errors import KafkaClientError, TopicError
from resultlog.kafka import KafkaConnection
from resultlog.settings import Settings

__all__ = [
    "TOPICS",
    "Topic",
    "TopicOutcome",
    "TopicSpec",
    "ensure_topics",
    "topic_config",
    "topic_specs",
]

_TIMEOUT_S = 30.0


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
    """What `topics create` makes: every topic of `TOPICS` (docs/design.md), as `settings`
    name and size them, with its own configuration, then `extra_config`.

    Results, their dead letters and the lm-eval answers accept messages up to the settings'
    `max_message_bytes` after compression; the work topics' partitions may be grown (they
    bound the useful worker count), every other count is exact.
    """
    base = {"min.insync.replicas": str(settings.min_insync_replicas), **(extra_config or {})}
    large = {"max.message.bytes": str(settings.max_message_bytes)}
    return [
        TopicSpec(
            topic.name(settings),
            topic.partition_count(settings),
            settings.replication_factor,
            config={
                **topic.config,
                **(large if topic.large else {}),
                **base,
                "cleanup.policy": topic.cleanup,
            },
            exact_partitions=topic.checked,
        )
        for topic in TOPICS
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
