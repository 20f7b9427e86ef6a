"""The Kafka boundary: every client resultlog uses is built here, from Settings.

A `KafkaConnection` is made once (settings, the codec they name, topic names) and handed to
the readers and writers, which ask it for clients: the durable producer every writer uses, the
assign()-only reader, group consumers and the admin client. Kafka failures leave this module
as `KafkaClientError` with one line saying what went wrong.

Every client asks `partition_count` before it reads or writes a topic, so that is where the
connection is checked, once per connection: a broker that refuses connections or a host that
does not resolve fails in `UNREACHABLE_S` seconds with one line (a broker that answers slowly
gets `_METADATA_TIMEOUT_S`). That check is for starting: once running, clients ride out a
broker restart (librdkafka reconnects; writes are retried, the aggregator keeps polling). It is
also where a topic's layout is checked against the settings: a partition count or cleanup
policy that differs is a `TopicLayoutError`, since run keys would map to other partitions
(existing runs would look empty and be paid for again) or records would be deleted.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource

from resultlog._diagnose import diagnose_tls
from resultlog._topic_table import TOPICS
from resultlog.errors import KafkaClientError, TopicLayoutError
from resultlog.schemas import Codec
from resultlog.settings import Settings

__all__ = [
    "LIBRDKAFKA_LOGGER",
    "UNREACHABLE_S",
    "Headers",
    "KafkaClientError",
    "KafkaConnection",
    "TopicLayout",
    "TopicLayoutError",
    "access_denied",
    "arrived",
    "produce",
    "produce_acked",
    "topic_layouts",
]

# librdkafka logs every failed connect attempt to stderr by default (every 50 ms while a
# broker is down); routed here, the application decides what to show.
LIBRDKAFKA_LOGGER = logging.getLogger("resultlog.librdkafka")
log = logging.getLogger(__name__)
# Conditions librdkafka rides out by retrying on its own (a coordinator still loading its
# state after a broker start, or moving): warnings about them tell a user nothing to do.
_TRANSIENT = ("Coordinator load in progress", "Coordinator not available", "Not coordinator")


class _TransientRetries(logging.Filter):
    """Drop librdkafka's "...: retrying" lines about transient conditions, unless this logger
    itself was set to INFO or below (`resultlog -v`): a host application's root level (Inspect
    logs everything to its eval log) does not bring them back."""

    def filter(self, record: logging.LogRecord) -> bool:
        if logging.NOTSET < LIBRDKAFKA_LOGGER.level <= logging.INFO:
            return True
        message = record.getMessage()
        return "retrying" not in message or not any(t in message for t in _TRANSIENT)


LIBRDKAFKA_LOGGER.addFilter(_TransientRetries())

DeliveryCallback = Callable[[KafkaError | None, Message], None]
Headers = list[tuple[str, str | bytes | None]]
MetadataClient = Producer | Consumer | AdminClient

_DURABLE: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "compression.type": "zstd",
    "linger.ms": 5,
}
_READER: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    # The end of a partition is only seen from an empty fetch, which the broker holds back
    # for fetch.wait.max.ms (500 ms by default): do not idle that long.
    "fetch.wait.max.ms": 50,
    # With sparse connections a new client's first request waits ~50 ms for its broker
    # connection; a short-lived reader connects to the brokers at once instead.
    "enable.sparse.connections": False,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
}
_METADATA_TIMEOUT_S = 15.0
_METADATA_RETRY_S = 0.1
_QUEUE_POLL_S = 0.1
UNREACHABLE_S = 3.0  # refused connections or unresolvable hosts for this long: give up
_UNREACHABLE_CODES = frozenset(
    {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE}
)
_DESCRIBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class TopicLayout:
    """What the settings say one of resultlog's topics must look like."""

    partitions: int
    cleanup_policy: str


def topic_layouts(settings: Settings) -> dict[str, TopicLayout]:
    """The layouts every client checks (docs/design.md): each checked topic of `TOPICS`."""
    return {
        topic.name(settings): TopicLayout(topic.partition_count(settings), topic.cleanup)
        for topic in TOPICS
        if topic.checked
    }


class KafkaConnection:
    """Settings, codec and topic names of one cluster, and the clients built from them."""

    def __init__(self, settings: Settings, codec: Codec | None = None) -> None:
        self.settings = settings
        # Registry framing when the settings name a registry (tests pass mock:// codecs).
        if codec is None:
            codec = Codec(settings.schema_registry_url, settings.registry_config())
        self.codec = codec
        self._lock = threading.Lock()
        self._reachable = False
        self._policies_checked: set[str] = set()
        self._policies_unknown: set[str] = set()  # warned once: the broker would not say
        self._policy_admin: AdminClient | None = None

    @property
    def results_topic(self) -> str:
        """The compacted topic of sample results."""
        return self.settings.results_topic

    @property
    def summaries_topic(self) -> str:
        """The compacted topic of run summaries."""
        return self.settings.summaries_topic

    @property
    def dlq_topic(self) -> str:
        """The dead-letter topic."""
        return self.settings.dlq_topic

    @property
    def changelog_topic(self) -> str:
        """The compacted changelog of the aggregator's state stores."""
        return self.settings.changelog_topic

    @property
    def index_topic(self) -> str:
        """The compacted run index: where each run key's records lie in its partition."""
        return self.settings.index_topic

    @property
    def work_topic(self) -> str:
        """The topic of chunk tasks for distributed workers."""
        return self.settings.work_topic

    @property
    def work_dlq_topic(self) -> str:
        """The dead-letter topic of chunk tasks."""
        return self.settings.work_dlq_topic

    @property
    def servers(self) -> str:
        """The bootstrap servers, as error messages name them."""
        return self.settings.bootstrap_servers

    def config(self, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A librdkafka configuration: the settings' one, our logger, then the overrides."""
        return {**self.settings.client_config(), "logger": LIBRDKAFKA_LOGGER, **(overrides or {})}

    def durable_producer(self, overrides: Mapping[str, Any] | None = None) -> Producer:
        """An idempotent acks=all zstd producer; deliveries time out as the settings say."""
        durable = {**_DURABLE, "message.timeout.ms": self.settings.delivery_timeout_ms}
        return Producer(self.config({**durable, **(overrides or {})}))

    def reader(self, overrides: Mapping[str, Any] | None = None) -> Consumer:
        """A consumer for assign()-based reading: no group membership, nothing committed."""
        # assign() needs no group, but librdkafka insists on a group.id.
        group = {"group.id": f"resultlog-reader-{uuid.uuid4().hex}"}
        return Consumer(self.config({**_READER, **(overrides or {}), **group}))

    def group_consumer(self, group_id: str, overrides: Mapping[str, Any] | None = None) -> Consumer:
        """A consumer-group member of `group_id`."""
        return Consumer(self.config({"group.id": group_id, **(overrides or {})}))

    def admin(self) -> AdminClient:
        """An admin client."""
        return AdminClient(self.config())

    def committed_offsets(
        self,
        group_id: str,
        topic: str,
        partitions: list[int],
        *,
        consumer: Consumer | None = None,
        timeout_s: float = 15.0,
    ) -> dict[int, int]:
        """The offsets `group_id` has committed on these partitions (absent: none committed).

        Asks through `consumer` (from `offsets_consumer(group_id)`; a new one if None: pass
        one to ask often), never through the admin API: librdkafka's ListConsumerGroupOffsets
        crashes the process with a segmentation fault when the group's coordinator moves
        (on NOT_COORDINATOR it re-queries the coordinator through the consumer-group handle an
        admin client does not have: a librdkafka defect, open in 2.16), as when its broker dies.
        """
        if not partitions:
            return {}
        own = consumer is None
        consumer = consumer or self.offsets_consumer(group_id)
        try:
            wanted = [TopicPartition(topic, p) for p in partitions]
            found = consumer.committed(wanted, timeout=timeout_s)
        except KafkaException as exc:
            raise KafkaClientError(
                f"cannot read the offsets of group {group_id} on {topic}: {_reason(exc)}"
            ) from exc
        finally:
            if own:
                consumer.close()
        return {tp.partition: tp.offset for tp in found if tp.offset >= 0}

    def offsets_consumer(self, group_id: str) -> Consumer:
        """A consumer that reads `group_id`'s committed offsets and never joins the group."""
        return self.group_consumer(group_id, {"enable.auto.commit": False})

    def topic_identity(self, topic: str, timeout_s: float = 10.0) -> tuple[str, str]:
        """The cluster ID and the topic's ID: which exact log a topic name means now (a
        deleted and re-created topic has a new ID)."""
        admin = self.admin()
        try:
            found = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout_s)
            description = found[topic].result(timeout_s)
            # Metadata names the cluster for any client (DescribeCluster may want an ACL). Asked
            # second: an admin client's first metadata request waits ~50 ms, its first
            # DescribeTopics does not, and the metadata is then at hand.
            cluster_id = admin.list_topics(topic, timeout=timeout_s).cluster_id
        except KafkaException as exc:
            raise KafkaClientError(f"cannot describe {topic}: {_reason(exc)}") from exc
        except TimeoutError as exc:  # the future outlived its request's own timeout
            raise KafkaClientError(f"cannot describe {topic}: no answer in {timeout_s}s") from exc
        if not cluster_id:
            raise KafkaClientError(f"the cluster of {topic} did not say its ID")
        return str(cluster_id), str(description.topic_id)

    def partition_count(
        self,
        topic: str,
        client: MetadataClient | None = None,
        *,
        created: bool = False,
        timeout_s: float = _METADATA_TIMEOUT_S,
    ) -> int:
        """How many partitions `topic` has, waiting out transient errors (a leader election).

        Asks through `client` (any of ours; a new admin client if None). `created`: the topic
        was just created, so also wait until the broker knows it and every partition has a
        leader. Otherwise one of resultlog's topics must match its layout in the settings.
        """
        self.check_connection(min(timeout_s, _METADATA_TIMEOUT_S))
        client = client if client is not None else self.admin()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                metadata = client.list_topics(topic, timeout=timeout_s)
            except KafkaException as exc:
                raise KafkaClientError(
                    f"cannot reach Kafka at {self.servers}: {_reason(exc)}"
                ) from exc
            found = metadata.topics.get(topic)
            if found is not None and found.error is not None:
                denied = access_denied(self.settings, found.error, "DESCRIBE", f"topic {topic}")
                if denied is not None:  # no waiting: an ACL does not appear by itself
                    raise KafkaClientError(denied)
            problem = _unavailable(topic, found, created=created)
            if problem is None and found is not None:
                count = len(found.partitions)
                if not created:
                    self.check_layout(topic, count)
                return count
            if time.monotonic() > deadline:
                raise KafkaClientError(f"topic {topic} is not available: {problem}")
            time.sleep(_METADATA_RETRY_S)

    def check_layout(self, topic: str, partitions: int, *, recheck: bool = False) -> None:
        """Refuse one of resultlog's topics whose partition count or cleanup policy differs
        from the settings (the policy is asked once per connection unless `recheck`)."""
        layout = topic_layouts(self.settings).get(topic)
        if layout is None:
            return
        if partitions != layout.partitions:
            raise TopicLayoutError(
                f"topic {topic} has {partitions} partitions but the settings say "
                f"{layout.partitions} (RESULTLOG_PARTITIONS): run keys would map to other "
                "partitions and existing runs would look empty; refusing to use it"
            )
        with self._lock:
            if topic in self._policies_checked and not recheck:
                return
        policy = self._cleanup_policy(topic)
        if policy is not None and set(policy.split(",")) != {layout.cleanup_policy}:
            raise TopicLayoutError(
                f"topic {topic} has cleanup.policy={policy} but resultlog needs "
                f"{layout.cleanup_policy}; refusing to use it"
            )
        with self._lock:
            self._policies_checked.add(topic)

    def _cleanup_policy(self, topic: str) -> str | None:
        """The topic's cleanup.policy, or None when the broker will not say (e.g. an ACL)."""
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        with self._lock:  # one admin client for every check (the aggregator checks often)
            if self._policy_admin is None:
                self._policy_admin = self.admin()
            admin = self._policy_admin
        future = admin.describe_configs([resource], request_timeout=_DESCRIBE_TIMEOUT_S)
        try:
            entries = future[resource].result(timeout=_DESCRIBE_TIMEOUT_S)
        except Exception as exc:  # the count is what matters most: go on without the policy
            with self._lock:
                first = topic not in self._policies_unknown
                self._policies_unknown.add(topic)
            reason = access_denied(self.settings, exc, "DESCRIBE_CONFIGS", f"topic {topic}")
            log.log(logging.WARNING if first else logging.DEBUG,
                    "cannot check the cleanup.policy of %s: %s", topic, reason or exc)  # fmt: skip
            return None
        entry = entries.get("cleanup.policy")
        return None if entry is None else str(entry.value or "")

    def check_connection(self, timeout_s: float = _METADATA_TIMEOUT_S) -> None:
        """Fail with one line, once per connection, when Kafka cannot be reached or refuses
        the login: in `UNREACHABLE_S` for refused connections and unknown hosts."""
        with self._lock:
            if self._reachable:
                return
        errors: list[KafkaError] = []
        # A consumer: a producer's metadata request could auto-create the topic it names.
        probe = Consumer(
            self.config({**_READER, "group.id": "resultlog-probe", "error_cb": errors.append})
        )
        started = time.monotonic()
        attempt_s = 0.25
        diagnosed = False
        wait_s = 0.0  # the first metadata request goes out at once; later ones give errors time
        try:
            while True:
                probe.poll(wait_s)
                wait_s = 0.05
                self._raise_if_refused_login(errors)
                if not diagnosed or any(e.code() == KafkaError._SSL for e in errors):
                    diagnosed = self._raise_if_tls_fails(errors, started)
                try:
                    # One topic, not the whole cluster's metadata (thousands of topics, maybe).
                    probe.list_topics(self.results_topic, timeout=attempt_s)
                except KafkaException as exc:
                    elapsed = time.monotonic() - started
                    self._raise_if_unreachable(errors, elapsed, timeout_s, exc)
                    # Longer attempts for a slow broker, but none past the budget.
                    budget = min(UNREACHABLE_S, timeout_s) if errors else timeout_s
                    attempt_s = max(0.05, min(2 * attempt_s, 1.0, budget - elapsed))
                    continue
                with self._lock:
                    self._reachable = True
                return
        finally:
            probe.close()

    def _raise_if_unreachable(
        self, errors: list[KafkaError], elapsed: float, timeout_s: float, exc: KafkaException
    ) -> None:
        down = [error for error in errors if error.code() in _UNREACHABLE_CODES]
        if down and elapsed >= min(UNREACHABLE_S, timeout_s):
            raise KafkaClientError(
                f"cannot reach Kafka at {self.servers}: {_connect_reason(down)}; "
                "check RESULTLOG_BOOTSTRAP_SERVERS, or start a local stack with `resultlog up`"
            ) from exc
        if elapsed >= timeout_s:
            raise KafkaClientError(
                f"cannot reach Kafka at {self.servers}: no answer within {timeout_s:g}s"
            ) from exc

    def _raise_if_tls_fails(self, errors: list[KafkaError], started: float) -> bool:
        """Raise the one-line reason of a TLS failure; True once a diagnosis found none.

        A TLS failure never heals by retrying: diagnose as soon as librdkafka reports one, or
        after a second of bare transport errors (e.g. a plaintext client on a TLS listener).
        """
        tls_error = any(error.code() == KafkaError._SSL for error in errors)
        if not errors or (not tls_error and time.monotonic() - started < 1.0):
            return False
        reason = diagnose_tls(self.settings, errors)
        if reason is not None:
            raise KafkaClientError(reason)
        return True

    def _raise_if_refused_login(self, errors: list[KafkaError]) -> None:
        if any(error.code() == KafkaError._AUTHENTICATION for error in errors):
            settings = self.settings
            raise KafkaClientError(
                f"Kafka at {self.servers} refused the login of {settings.sasl_username!r} "
                f"({settings.sasl_mechanism}): authentication failed; check "
                "RESULTLOG_SASL_USERNAME/RESULTLOG_SASL_PASSWORD"
            )

    def close(self) -> None:
        """Release the codec's schema-registry client (if the codec made one)."""
        self.codec.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def arrived(consumer: Consumer, limit: int, wait_s: float) -> list[Message]:
    """Up to `limit` messages already fetched, else the first to arrive within `wait_s`.

    consume() waits until it has `limit` messages or its timeout passed, so a read that
    reaches the end of what there is would idle out the whole timeout: poll() returns as soon
    as one message arrives.
    """
    batch: list[Message] = consumer.consume(num_messages=limit, timeout=0)
    if batch:
        return batch
    message = consumer.poll(wait_s)
    return [] if message is None else [message]


def produce(
    producer: Producer,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    *,
    partition: int = -1,
    headers: Headers | None = None,
    on_delivery: DeliveryCallback | None = None,
    wait_s: float = 1.0,
) -> None:
    """Queue one message (partition -1: the partitioner's choice), then serve delivery reports.

    While the local queue is full, deliveries are served for up to `wait_s` to make room.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            producer.produce(
                topic,
                key=key,
                value=value,
                partition=partition,
                headers=headers,
                on_delivery=on_delivery,
            )
            break
        except BufferError as exc:
            if time.monotonic() >= deadline:
                raise KafkaClientError(
                    f"the local queue of messages for {topic} stayed full for {wait_s:g}s"
                ) from exc
            producer.poll(_QUEUE_POLL_S)
        except KafkaException as exc:
            raise KafkaClientError(_reason(exc)) from exc
    producer.poll(0)


def produce_acked(
    producer: Producer,
    topic: str,
    key: bytes | None,
    value: bytes | None,
    *,
    partition: int,
    timeout_s: float,
) -> int:
    """Produce one message and wait for the broker's acknowledgement; its offset.

    Raises KafkaClientError when it cannot be queued or is not acknowledged in `timeout_s`.
    """
    written: list[Message] = []
    failed: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failed.append(error)
        else:
            written.append(message)

    produce(producer, topic, key, value, partition=partition, on_delivery=delivered)
    producer.flush(timeout_s)
    if failed or not written:
        raise KafkaClientError(failed[0].str() if failed else "no acknowledgement in time")
    return written[0].offset() or 0


def _unavailable(topic: str, found: Any, *, created: bool) -> str | None:
    """Why the topic's metadata is not usable yet (None: it is); raise if it does not exist."""
    error = None if found is None else found.error
    if found is None or (error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        if not created:
            raise KafkaClientError(f"topic {topic} does not exist; run `resultlog topics create`")
        return "the broker does not know it yet"
    if error is not None:
        return str(error.str())
    if not found.partitions:
        return "it has no partitions"
    if created and any(p.leader < 0 for p in found.partitions.values()):
        return "a partition has no leader yet"
    return None


def _connect_reason(errors: list[KafkaError]) -> str:
    """What librdkafka said about the last failed connection, without its broker prefix."""
    specific = [e for e in errors if e.code() != KafkaError._ALL_BROKERS_DOWN] or errors
    text = str(specific[-1].str())
    text = text.split("/bootstrap: ", 1)[-1]
    return text.split(" (after ", 1)[0]


def _reason(exc: KafkaException) -> str:
    """The text of the KafkaError inside a KafkaException."""
    error = exc.args[0] if exc.args else exc
    return str(error.str()) if isinstance(error, KafkaError) else str(error)


_AUTHORIZATION_FAILURES = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)


def access_denied(
    settings: Settings, error: KafkaError | BaseException | None, operation: str, resource: str
) -> str | None:
    """One line naming who Kafka denied which operation on what; None if `error` is no denial.

    `error` may be an exception raised from a KafkaException (as `produce` raises). Kafka's own
    text ("Broker: Topic authorization failed", or a Java request dump for admin calls) names
    neither the principal nor the operation: the caller knows both.
    """
    if isinstance(error, BaseException):
        cause = error if isinstance(error, KafkaException) else error.__cause__
        error = cause.args[0] if isinstance(cause, KafkaException) and cause.args else None
    if not isinstance(error, KafkaError) or error.code() not in _AUTHORIZATION_FAILURES:
        return None
    principal = settings.principal()
    return (
        f"Kafka denied {principal} {operation} on {resource} ({error.name()}); an admin "
        f"grants it with `resultlog acl grant --principal {principal} --role ...`"
    )
