"""A writer's bind to the results topic it started on.

A topic deleted and re-created under the same name is another log (a new topic ID): the
producer would go on writing into it, and a run would end "successfully" with a summary the
log does not hold. The writer reads the topic's ID when it starts, a thread of its own looks
at it every few seconds (never per record), and the writer looks once more when it closes.
"""

from __future__ import annotations

import logging
import threading

from confluent_kafka import KafkaError, KafkaException, TopicCollection

from resultlog.kafka import KafkaConnection
from resultlog.producer.errors import PersistenceError, TopicRecreatedError

__all__ = ["TopicBinding"]

log = logging.getLogger(__name__)

_CHECK_S = 2.0  # how often a running writer looks at the topic's ID
_START_TIMEOUT_S = 15.0
_CHECK_TIMEOUT_S = 5.0
_MISSING = ""  # the ID of a topic that does not exist
_GONE = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.UNKNOWN_TOPIC_ID})


class TopicBinding:
    """The ID of the topic a writer started on, and a watch that notices when it changes."""

    def __init__(self, kafka: KafkaConnection, topic: str, interval_s: float = _CHECK_S) -> None:
        self.topic = topic
        self._admin = kafka.admin()
        found = self._read(_START_TIMEOUT_S)
        if not found:
            raise PersistenceError(f"cannot read the topic ID of {topic}", retriable=False)
        self.topic_id = found
        self._changed: TopicRecreatedError | None = None
        self._missing = 0  # consecutive checks that found no topic
        self._interval_s = interval_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="resultlog-bind", daemon=True)
        self._thread.start()

    def check(self) -> None:
        """Raise TopicRecreatedError if the watch has seen the topic change (no round trip)."""
        if self._changed is not None:
            raise self._changed

    def check_now(self) -> None:
        """Look at the topic's ID now (one round trip) and raise if it is another topic's."""
        self.check()
        found = self._read(_CHECK_TIMEOUT_S)
        if found is not None and found != self.topic_id:
            raise self._error(found)

    def close(self) -> None:
        """Stop the watch (a check under way finishes on its own)."""
        self._stopped.set()

    def _watch(self) -> None:
        while self._changed is None and not self._stopped.wait(self._interval_s):
            found = self._read(_CHECK_TIMEOUT_S)
            self._missing = self._missing + 1 if found == _MISSING else 0
            # A missing topic twice in a row: one answer of a broker that has just started
            # may not know it yet. A new ID is another topic at once.
            if (found and found != self.topic_id) or self._missing >= 2:
                self._changed = self._error(found or _MISSING)
                log.debug("%s", self._changed)

    def _read(self, timeout_s: float) -> str | None:
        """The topic's ID now (_MISSING: no such topic; None: the broker did not say)."""
        try:
            found = self._admin.describe_topics(
                TopicCollection([self.topic]), request_timeout=timeout_s
            )
            return str(found[self.topic].result(timeout_s).topic_id)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() in _GONE:
                return _MISSING
            log.debug("cannot read the topic ID of %s: %s", self.topic, exc)
            return None
        except TimeoutError:
            # No broker answered in time (an outage, a restart): the topic is not known to
            # have changed, and the write's own delivery reports say what became of it.
            log.debug("cannot read the topic ID of %s: no answer in %.0f s", self.topic, timeout_s)
            return None

    def _error(self, found: str) -> TopicRecreatedError:
        if found == _MISSING:
            what = f"was deleted under this write (topic ID was {self.topic_id})"
            todo = "create it (resultlog topics create) and run again"
        else:
            what = f"was deleted and re-created under this write (topic ID {found}, was "
            what += f"{self.topic_id})"
            todo = "run again to write into the new topic"
        return TopicRecreatedError(
            f"results topic {self.topic} {what}: the records written before went with the "
            f"old topic; {todo}"
        )
