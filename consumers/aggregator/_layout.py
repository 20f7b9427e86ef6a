"""The running aggregator's watch on its topics' layout and the results topic's ID, off the
consumer thread.

On the consumer's own connection a metadata request queues behind its long-poll fetch, which
stalled the consumer thread for up to the fetch wait every few seconds; an admin client has a
connection of its own, and a thread of its own keeps even its round trips off the hot path.
The results topic's ID is looked at every second: a topic deleted and re-created under the
same name (no rebalance need follow) is another log, whose offsets the state does not fold.
So is the changelog's: a re-created changelog holds none of the state, which is then written
to it whole.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient

from resultlog.errors import TopicLayoutError
from resultlog.kafka import KafkaConnection

__all__ = ["MISSING", "LayoutWatch", "check_layout", "topic_id"]

log = logging.getLogger(__name__)
_CHECK_S = 5.0  # how often a running aggregator checks its topics against the settings
_ID_CHECK_S = 1.0  # how often it looks at the results topic's ID
MISSING = ""  # the topic ID of a topic that does not exist (deleted, say)


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


def topic_id(admin: AdminClient, topic: str) -> str | None:
    """The topic's ID (MISSING if it does not exist; None if the broker did not say)."""
    try:
        found = admin.describe_topics(TopicCollection([topic]), request_timeout=1.0)
        return str(found[topic].result(2.0).topic_id)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            return MISSING
        return None
    except TimeoutError:  # no answer in time (a broker down): not known to have changed
        return None


class LayoutWatch:
    """Every few seconds, checks the topics; `failure` holds the first mismatch found.
    Every second, notes the first topic's ID in `seen_id` and the changelog topic's (if
    any) in `seen_changelog_id` (None until known)."""

    def __init__(
        self,
        kafka: KafkaConnection,
        topics: list[str],
        interval_s: float = _CHECK_S,
        changelog: str | None = None,
    ):
        self.failure: TopicLayoutError | None = None
        self.seen_id: str | None = None
        self.seen_changelog_id: str | None = None
        self._changelog = changelog
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
        next_layout = time.monotonic() + self._interval_s
        while not self._stopped.wait(min(_ID_CHECK_S, self._interval_s)):
            try:
                seen = topic_id(admin, self._topics[0])
                if seen is not None:
                    self.seen_id = seen
                if self._changelog is not None:
                    self.seen_changelog_id = topic_id(admin, self._changelog) or None
                if time.monotonic() >= next_layout:
                    next_layout = time.monotonic() + self._interval_s
                    check_layout(self._kafka, admin, self._topics)
            except TopicLayoutError as exc:
                self.failure = exc
                return
            except Exception as exc:  # a failed check is retried; it must not end the watch
                log.debug("layout check failed: %s", exc)
