"""The consumer loop's ingest step: consume a batch, decode it outside the lock, fold it (and
note it in the run index) under the lock, then hand it to the participants."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from resultlog.consumers._ingest import Ingested, Ingestor, stretches
from resultlog.consumers.aggregator._index import RunIndexWriter
from resultlog.consumers.aggregator._member import Member
from resultlog.consumers.aggregator.participants import Participant, overriding
from resultlog.consumers.errors import ConsumerError
from resultlog.consumers.fold import Contribution
from resultlog.kafka import arrived
from resultlog.schemas import RegistryError

__all__ = ["IngestStep"]

log = logging.getLogger(__name__)
_BATCH = 2000
_APPLY_CHUNK = 200  # records folded per hold of the state lock
_ERROR_LOG_EVERY_S = 30.0
_REGISTRY_PAUSE_S = 1.0  # before reading again what the registry kept us from decoding
_REGISTRY_ERROR = -1  # the key of registry failures among the rate-limited error logs


class IngestStep:
    """Folds what the group consumer reads, skipping the partitions still `restoring`."""

    def __init__(
        self,
        member: Member,
        *,
        ingestor: Ingestor,
        index: RunIndexWriter,
        restoring: set[int],
        participants: Sequence[Participant],
        stopping: threading.Event,
    ) -> None:
        kafka, self._shared, self._metrics, self._consumer = member
        self.topic = kafka.results_topic
        self._ingestor = ingestor
        self._index = index
        self._restoring = restoring  # the partitions' own set: it changes under us
        self._told = overriding(participants, "ingested")
        self._stopping = stopping
        self._error_logged: dict[int, float] = {}

    def step(self, wait_s: float) -> None:
        """Consume (waiting at most `wait_s` for the first record) and fold one batch."""
        self._handle(self._receive(wait_s))

    def _receive(self, wait_s: float) -> list[Message]:
        try:
            batch = arrived(self._consumer, _BATCH, wait_s)
        except KafkaException as exc:
            raise ConsumerError(f"cannot consume {self.topic}: {exc.args[0]}") from exc
        return batch

    def _handle(self, batch: list[Message]) -> None:
        """Decode outside the lock, apply inside it, hand to the participants after."""
        # The restoring partitions' records were fetched before their pause: read again later.
        decided = self._ingestor.ingest_batch(batch, self._restoring)
        for error in decided.errors:
            self._consume_error(error)
        if decided.registry_error is not None:
            self._registry_failed(decided.registry_error)
        decoded, ends, unread = decided.decoded, decided.ends, decided.unread
        state = self._shared.state
        for start in range(0, len(decoded), _APPLY_CHUNK):
            # Released between chunks: a reader never waits for a whole batch to be folded.
            with self._shared.lock:
                chunk = decoded[start : start + _APPLY_CHUNK]
                self._apply_all(chunk)
                # Counted before the lock lets readers see the chunk: whoever sees the
                # folded state (or readiness) sees the records counted too.
                self._metrics.consumed.inc(len(chunk))
        with self._shared.lock:
            for partition, offset in ends:
                state.reached_end(partition, offset)
        if decoded:
            for participant in self._told:
                participant.ingested(decoded)
        if unread:
            self._read_again(unread)

    def _apply_all(self, items: list[Ingested]) -> None:
        """Apply items in order, each stretch of consecutive records of one run key at once."""
        for first, group in stretches(items):
            if group:
                self._put_run(first, group)
            else:
                self._apply(first)

    def _put_run(self, first: Ingested, group: list[tuple[int, Contribution]]) -> None:
        assert first.run_key is not None  # a stretch's records have one
        self._index.note_all(first.partition, first.key, group[0][0], group[-1][0])
        self._shared.state.put_run(first.partition, first.run_key, group)

    def _apply(self, item: Ingested) -> None:
        state = self._shared.state
        self._index.note(item.partition, item.offset, item.key)
        record_id = item.record_id
        if record_id is None:
            state.advance(item.partition, item.offset)
        elif item.contribution is None:
            state.delete(item.partition, item.offset, record_id)
        else:
            state.put(item.partition, item.offset, record_id, item.contribution)

    def _consume_error(self, error: KafkaError) -> None:
        if error.fatal():
            raise ConsumerError(f"fatal consumer error on {self.topic}: {error.str()}")
        # librdkafka retries on its own and repeats the error on every poll while it lasts.
        now = time.monotonic()
        if now - self._error_logged.get(error.code(), -_ERROR_LOG_EVERY_S) >= _ERROR_LOG_EVERY_S:
            self._error_logged[error.code()] = now
            log.warning("consumer error on %s (retrying): %s", self.topic, error.str())

    def _registry_failed(self, exc: RegistryError) -> None:
        now = time.monotonic()
        if now - self._error_logged.get(_REGISTRY_ERROR, -_ERROR_LOG_EVERY_S) >= _ERROR_LOG_EVERY_S:
            self._error_logged[_REGISTRY_ERROR] = now
            log.warning("the schema registry failed (will read again, not dead-letter): %s", exc)

    def _read_again(self, unread: dict[int, int]) -> None:
        """Rewind partitions to the records the registry kept us from decoding, then pause:
        a record is never dead-lettered because the registry was away."""
        for partition, offset in unread.items():
            try:
                self._consumer.seek(TopicPartition(self.topic, partition, offset))
            except KafkaException as exc:  # revoked meanwhile: its new owner reads it
                log.debug("cannot rewind %s[%d]: %s", self.topic, partition, exc)
        self._stopping.wait(_REGISTRY_PAUSE_S)
