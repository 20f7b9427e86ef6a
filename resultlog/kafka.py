"""The Kafka boundary: every client resultlog uses is built here, from Settings.

A `KafkaConnection` is made once (settings, the codec they name, topic names) and handed to
the readers and writers, which ask it for clients: the durable producer every writer uses, the
assign()-only reader, group consumers and the admin client. Kafka failures leave this module
as `KafkaClientError` with one line saying what went wrong.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Self

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

from resultlog.errors import KafkaClientError
from resultlog.schemas import Codec
from resultlog.settings import Settings

__all__ = ["LIBRDKAFKA_LOGGER", "Headers", "KafkaClientError", "KafkaConnection", "produce"]

# librdkafka logs every failed connect attempt to stderr by default (every 50 ms while a
# broker is down); routed here, the application decides what to show.
LIBRDKAFKA_LOGGER = logging.getLogger("resultlog.librdkafka")

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
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
}
_METADATA_TIMEOUT_S = 15.0
_METADATA_RETRY_S = 0.1
_QUEUE_POLL_S = 0.1


class KafkaConnection:
    """Settings, codec and topic names of one cluster, and the clients built from them."""

    def __init__(self, settings: Settings, codec: Codec | None = None) -> None:
        self.settings = settings
        # Registry framing when the settings name a registry (tests pass mock:// codecs).
        if codec is None:
            codec = Codec(settings.schema_registry_url, settings.registry_config())
        self.codec = codec

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

    def reader(self) -> Consumer:
        """A consumer for assign()-based reading: no group membership, nothing committed."""
        # assign() needs no group, but librdkafka insists on a group.id.
        group = {"group.id": f"resultlog-reader-{uuid.uuid4().hex}"}
        return Consumer(self.config({**_READER, **group}))

    def group_consumer(self, group_id: str, overrides: Mapping[str, Any] | None = None) -> Consumer:
        """A consumer-group member of `group_id`."""
        return Consumer(self.config({"group.id": group_id, **(overrides or {})}))

    def admin(self) -> AdminClient:
        """An admin client."""
        return AdminClient(self.config())

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
        leader.
        """
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
            problem = _unavailable(topic, found, created=created)
            if problem is None and found is not None:
                return len(found.partitions)
            if time.monotonic() > deadline:
                raise KafkaClientError(f"topic {topic} is not available: {problem}")
            time.sleep(_METADATA_RETRY_S)

    def check_login(self, timeout_s: float = 15.0) -> None:
        """With SASL configured, fail at once and say so when the broker refuses the login."""
        settings = self.settings
        if not settings.security_protocol.startswith("SASL"):
            return
        # librdkafka reports a refused login only to error_cb (served by poll), while metadata
        # calls just time out as "transport failure": poll for the refusal.
        refused: list[KafkaError] = []
        producer = Producer(self.config({"error_cb": refused.append}))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            producer.poll(0.1)
            if any(error.code() == KafkaError._AUTHENTICATION for error in refused):
                raise KafkaClientError(
                    f"Kafka at {self.servers} refused the login of {settings.sasl_username!r} "
                    f"({settings.sasl_mechanism}): authentication failed; check "
                    "RESULTLOG_SASL_USERNAME/RESULTLOG_SASL_PASSWORD"
                )
            try:
                producer.list_topics(timeout=0.2)
                return
            except KafkaException:
                continue

    def close(self) -> None:
        """Release the codec's schema-registry client (if the codec made one)."""
        self.codec.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


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


def _reason(exc: KafkaException) -> str:
    """The text of the KafkaError inside a KafkaException."""
    error = exc.args[0] if exc.args else exc
    return str(error.str()) if isinstance(error, KafkaError) else str(error)
