"""The running aggregator's watch on its topics' layout, off the consumer thread.

On the consumer's own connection a metadata request queues behind its long-poll fetch, which
stalled the consumer thread for up to the fetch wait every few seconds; an admin client has a
connection of its own, and a thread of its own keeps even its round trips off the hot path.
"""

from __future__ import annotations

import logging
import threading

from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient

from resultlog.errors import TopicLayoutError
from resultlog.kafka import KafkaConnection

__all__ = ["LayoutWatch", "check_layout"]

log = logging.getLogger(__name__)
_CHECK_S = 5.0  # how often a running aggregator checks its topics against the settings


def check_layout(kafka: KafkaConnection, client: Consumer | AdminClient, topics: list[str]) -> None:
    """Raise TopicLayoutError once a topic no longer matches the settings (a broker that does
    not answer is checked next time)."""
    for topic in topics:
        try:
            found = client.list_topics(topic, timeout=1.0).topics.get(topic)
        except KafkaException:
            return  # the broker is away: librdkafka reconnects
        if found is not None and found.error is None and found.partitions:
            kafka.check_layout(topic, len(found.partitions), recheck=True)


class LayoutWatch:
    """Every few seconds, checks the topics; `failure` holds the first mismatch found."""

    def __init__(self, kafka: KafkaConnection, topics: list[str], interval_s: float = _CHECK_S):
        self.failure: TopicLayoutError | None = None
        self._kafka = kafka
        self._topics = topics
        self._interval_s = interval_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="resultlog-layout", daemon=True)

    def start(self) -> None:
        """Start checking."""
        self._thread.start()

    def stop(self) -> None:
        """Stop checking (at once; a check under way finishes on its own)."""
        self._stopped.set()

    def _run(self) -> None:
        admin = self._kafka.admin()
        while not self._stopped.wait(self._interval_s):
            try:
                check_layout(self._kafka, admin, self._topics)
            except TopicLayoutError as exc:
                self.failure = exc
                return
            except Exception as exc:  # a failed check is retried; it must not end the watch
                log.debug("layout check failed: %s", exc)
