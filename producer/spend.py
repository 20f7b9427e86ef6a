"""The spend ledger: every run key's pairs in flight and paid for, shared by all its writers.

One compacted message per (sample, epoch), keyed as its result is and in the same partition
(the results' partitioner), with a JSON value: a pair is `reserved` by a writer (holder
token, the reservation in USD, when it lapses) before its model call, and `settled` with its
key's spend once it has an outcome. Compaction keeps each pair's latest state, so the ledger
holds the run key's spend however old, and the pairs in flight now.

Log order decides between writers: a writer reserves, then reads the partition up to its
reservation, and counts the reservations that came before it. Of two writers that reserve
at once, the later one counts the earlier one, so they never both spend the last of a budget.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Message, TopicPartition
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from resultlog.consumers._scan import watermark_offsets
from resultlog.kafka import KafkaClientError, KafkaConnection, produce, produce_acked
from resultlog.producer.errors import ProducerError
from resultlog.schemas import RunKey, encode_key, partition_for, run_key_prefix

__all__ = ["LedgerEntry", "Seen", "SpendLedger", "SpendLedgerError", "open_ledger"]

_TIMEOUT_S = 15.0
_POLL_S = 0.1
_FETCH_WAIT_MS = 5


class SpendLedgerError(ProducerError):
    """The spend ledger could not be read or written."""


class LedgerEntry(BaseModel):
    """One pair's latest state in the ledger."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    state: Literal["reserved", "settled"]
    spent: float = Field(ge=0.0, le=1e6, allow_inf_nan=False)
    """The key's spend: before the pair (reserved), or after it (settled)."""
    reserved: float = Field(default=0.0, ge=0.0, le=1e6, allow_inf_nan=False)
    """What the pair in flight may cost, as its writer estimated it (0: unknown)."""
    holder: str = ""
    expires_ms: int = 0
    ran: bool = False
    """Settled after a model call (False: a reservation withdrawn before any)."""


@dataclass(frozen=True)
class Seen:
    """A pair's latest entry and its offset in the ledger."""

    offset: int
    entry: LedgerEntry


class SpendLedger:
    """One writer's view of a run key's ledger: it appends entries and follows the partition."""

    def __init__(self, kafka: KafkaConnection, run_key: RunKey, holder: str) -> None:
        self.run_key = run_key
        self.holder = holder
        self.pairs: dict[tuple[int, int], Seen] = {}
        self.changed: list[tuple[int, int]] = []  # pairs read since a reader last took them
        self._kafka = kafka
        self._topic = kafka.settings.spend_topic
        self._prefix = run_key_prefix(run_key)
        # An admission waits for its reservation's acknowledgement and then reads it back:
        # neither batching writes nor idle fetches may hold it up.
        self._producer = kafka.durable_producer({"linger.ms": 0})
        try:
            count = kafka.partition_count(self._topic, self._producer, timeout_s=_TIMEOUT_S)
        except KafkaClientError as exc:
            raise SpendLedgerError(f"cannot keep the budget of {run_key}: {exc}") from exc
        self._partition = partition_for(run_key, count)
        self._consumer = kafka.reader({"fetch.wait.max.ms": _FETCH_WAIT_MS})
        self._position = 0  # the next offset to read
        self._reading = threading.Lock()  # reads run in threads; close waits for them
        self._closed = False

    def catch_up(self) -> None:
        """Read the run key's entries from the partition's start to its current end."""
        tp = TopicPartition(self._topic, self._partition)
        try:
            _, high = watermark_offsets(self._consumer, tp, _TIMEOUT_S)
        except KafkaException as exc:
            raise SpendLedgerError(f"cannot read the spend of {self.run_key}: {exc}") from exc
        self._consumer.assign([TopicPartition(self._topic, self._partition, OFFSET_BEGINNING)])
        self.read_through(high - 1)

    def read_through(self, offset: int) -> None:
        """Read entries until the one at `offset` (or past it: compaction leaves holes)."""
        deadline = time.monotonic() + _TIMEOUT_S
        while self._position <= offset:
            if self.read_some(_POLL_S):
                continue
            self._skip_holes()
            if self._position <= offset and time.monotonic() > deadline:
                raise SpendLedgerError(
                    f"cannot read the spend of {self.run_key}: the ledger did not reach "
                    f"offset {offset} within {_TIMEOUT_S:.0f}s"
                )

    def read_some(self, timeout_s: float) -> int:
        """Read what arrives within `timeout_s`; how many entries of the run key came."""
        try:
            with self._reading:
                if self._closed:
                    return 0
                # consume() would wait out the timeout for a full batch: wait for the first
                # message only, then take what has arrived with it.
                first = self._consumer.poll(timeout_s)
                rest = self._consumer.consume(num_messages=10_000, timeout=0) if first else []
                batch = [first, *rest] if first is not None else []
        except KafkaException as exc:
            raise SpendLedgerError(f"cannot read the spend of {self.run_key}: {exc}") from exc
        ours = 0
        for message in batch:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise SpendLedgerError(f"cannot read the spend of {self.run_key}: {error.str()}")
            ours += self._apply(message)
        return ours

    def _skip_holes(self) -> None:
        """Move past offsets compaction removed: the consumer's position is past them."""
        with self._reading, contextlib.suppress(KafkaException):
            [position] = self._consumer.position([TopicPartition(self._topic, self._partition)])
            if position.offset >= 0:
                self._position = max(self._position, position.offset)

    def reserve(self, pair: tuple[int, int], spent: float, amount: float, ttl_s: float) -> int:
        """Append the pair's reservation; its offset once the broker has it."""
        expires = int((time.time() + ttl_s) * 1000)
        entry = LedgerEntry(
            state="reserved", spent=spent, reserved=amount, holder=self.holder, expires_ms=expires
        )
        return self._write(pair, entry)

    def settle(self, pair: tuple[int, int], spent: float, *, ran: bool = True) -> int:
        """Append the pair's spend after its outcome (`ran`) or before it (a withdrawal)."""
        entry = LedgerEntry(state="settled", spent=spent, holder=self.holder, ran=ran)
        return self._write(pair, entry)

    def forget(self) -> int:
        """Tombstone every pair of the run key the ledger holds (a purge); how many."""
        failed: list[str] = []

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                failed.append(error.str())

        pairs = list(self.pairs)
        try:
            for pair in pairs:
                key = encode_key(self.run_key, *pair)
                produce(
                    self._producer,
                    self._topic,
                    key,
                    None,
                    partition=self._partition,
                    on_delivery=delivered,
                )
        except KafkaClientError as exc:
            failed.append(str(exc))
        if self._producer.flush(self._kafka.settings.delivery_timeout_ms / 1000) > 0:
            failed.append("not acknowledged in time")
        if failed:
            raise SpendLedgerError(f"cannot delete the spend of {self.run_key}: {failed[0]}")
        self.pairs.clear()
        return len(pairs)

    def close(self) -> None:
        """Close the ledger's clients (every entry was acknowledged when written)."""
        with self._reading, contextlib.suppress(RuntimeError):
            self._closed = True
            self._consumer.close()

    def _apply(self, message: Message) -> int:
        offset = message.offset() or 0
        self._position = max(self._position, offset + 1)
        key, value = message.key(), message.value()
        if key is None or not key.startswith(self._prefix):
            return 0
        pair = _pair(key[len(self._prefix) :])
        if pair is None:
            return 0
        if value is None:  # a purge deleted the pair's spend
            self.changed.append(pair)
            return int(self.pairs.pop(pair, None) is not None)
        with contextlib.suppress(ValidationError):  # not an entry of ours: counts for nothing
            self.pairs[pair] = Seen(offset, LedgerEntry.model_validate_json(value))
            self.changed.append(pair)
            return 1
        return 0

    def _write(self, pair: tuple[int, int], entry: LedgerEntry) -> int:
        """Append the pair's entry and wait for the broker; its offset."""
        key = encode_key(self.run_key, *pair)
        timeout_s = self._kafka.settings.delivery_timeout_ms / 1000
        try:
            return produce_acked(
                self._producer,
                self._topic,
                key,
                entry.model_dump_json().encode(),
                partition=self._partition,
                timeout_s=timeout_s,
            )
        except KafkaClientError as exc:
            raise SpendLedgerError(f"cannot write the spend of {self.run_key}: {exc}") from exc


def _pair(rest: bytes) -> tuple[int, int] | None:
    """(sample_index, epoch) from the part of a key after the run key's prefix."""
    parts = rest.split(b"/")
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        return None
    return int(parts[0]), int(parts[1])


@contextlib.contextmanager
def open_ledger(kafka: KafkaConnection, run_key: RunKey, holder: str) -> Iterator[SpendLedger]:
    """The run key's ledger, read to its current end, closed on exit."""
    ledger = SpendLedger(kafka, run_key, holder)
    try:
        ledger.catch_up()
        yield ledger
    finally:
        ledger.close()
