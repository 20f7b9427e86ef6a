"""Result stores: where a worker makes each finished (sample, epoch) durable."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Collection, Mapping
from typing import Any, Protocol, runtime_checkable

from confluent_kafka import KafkaError, Message

from resultlog.consumers import (
    KeyHistory,
    LoadedViews,
    RunRecords,
    read_key_histories,
    read_run_views,
)
from resultlog.errors import TopicError
from resultlog.kafka import KafkaClientError, KafkaConnection, access_denied, produce
from resultlog.producer._binding import TopicBinding
from resultlog.producer._fit import SizeLimits, reduce_to
from resultlog.producer.errors import PersistenceError
from resultlog.schemas import RunKey, SampleResult, WireFormat, encode_key, partition_for
from resultlog.topics import topic_config

__all__ = ["HistoryStore", "KafkaResultStore", "NoopResultStore", "ResultStore"]

log = logging.getLogger(__name__)

_CONNECT_TIMEOUT_S = 15.0
# librdkafka checks message.max.bytes before compressing: allow raw records this many times
# the topic's (compressed) limit, so a compressible record is sized by what the broker sees.
_RAW_ALLOWANCE = 4
_LIBRDKAFKA_MAX_MESSAGE = 1_000_000_000


class ResultStore(Protocol):
    """Durable per-(sample, epoch) records of runs."""

    async def write(self, record: SampleResult) -> None:
        """Return only once the record is durable; raise PersistenceError otherwise."""
        ...

    async def load(self, run_key: RunKey) -> RunRecords | LoadedViews:
        """The latest record (or its fold view) of every (sample, epoch) of the run key, and
        the undecodable count."""
        ...

    async def close(self) -> None:
        """Release resources after making every write durable."""
        ...


@runtime_checkable
class HistoryStore(Protocol):
    """A store several writers share: what a degraded write needs to never shadow a success."""

    async def histories(
        self, run_key: RunKey, pairs: Collection[tuple[int, int]]
    ) -> Mapping[tuple[int, int], KeyHistory]:
        """Each (sample_index, epoch)'s latest record and last completed one."""
        ...

    async def restore(self, record: SampleResult, value: bytes) -> None:
        """Write a completed record again, byte for byte, so that it is the latest."""
        ...


class NoopResultStore:
    """Keeps nothing: runs without persistence evaluate everything every time."""

    async def write(self, record: SampleResult) -> None:
        """Accept and forget the record."""

    async def load(self, run_key: RunKey) -> RunRecords:
        """Nothing was ever stored."""
        return RunRecords([], 0)

    async def close(self) -> None:
        """Nothing to release."""


class KafkaResultStore:
    """Writes records to the compacted results topic, one partition per run key.

    Bound to the topic it opened: once that topic is deleted or re-created under it (see
    `_binding`), every write and the close raise TopicRecreatedError.
    """

    def __init__(
        self, kafka: KafkaConnection, *, producer_overrides: Mapping[str, Any] | None = None
    ) -> None:
        self.topic = kafka.results_topic
        self._kafka = kafka
        self._codec = kafka.codec
        try:
            self._partitions = kafka.partition_count(self.topic, timeout_s=_CONNECT_TIMEOUT_S)
        except KafkaClientError as exc:
            raise PersistenceError(str(exc)) from exc
        topic_bytes = _max_message_bytes(kafka, self.topic)  # before the producer: may refuse
        raw_bytes = min(topic_bytes * _RAW_ALLOWANCE, _LIBRDKAFKA_MAX_MESSAGE)
        overrides = {"message.max.bytes": raw_bytes, **(producer_overrides or {})}
        self.limits = SizeLimits(int(overrides["message.max.bytes"]), topic_bytes)
        self._producer = kafka.durable_producer(overrides)
        self._binding = TopicBinding(kafka, self.topic)
        self._closing = threading.Event()
        # Delivery reports are only served from poll()/flush(): a thread keeps polling.
        self._poller = threading.Thread(target=self._poll_loop, name="resultlog-poll", daemon=True)
        self._poller.start()

    async def write(self, record: SampleResult) -> None:
        """Produce the record and wait for the broker's acknowledgement (acks=all).

        A record too large for the topic is written in its reduced form (see `_fit`); one the
        broker still refuses as too large is reduced again, once: to the topic's limit read
        anew, and at most half its size.
        """
        key = encode_key(record.run_key, record.sample_index, record.epoch)
        value = await self._encoded(record)
        if not self.limits.fits(key, value):
            record, value = self._reduce(record, self.limits.reduced_size(key))
        try:
            await self._send(record, key, value)
        except _TooLargeError:  # the topic's limit was lowered since we read it, perhaps
            topic_bytes = await asyncio.to_thread(_max_message_bytes, self._kafka, self.topic)
            self.limits = SizeLimits(self.limits.producer_bytes, topic_bytes)
            size = min(self.limits.reduced_size(key), len(value) // 2)
            record, value = self._reduce(record, size)
            await self._send(record, key, value)

    async def histories(
        self, run_key: RunKey, pairs: Collection[tuple[int, int]]
    ) -> Mapping[tuple[int, int], KeyHistory]:
        """Each pair's latest record and last completed one (in a thread: the read blocks)."""
        return await asyncio.to_thread(read_key_histories, self._kafka, run_key, pairs)

    async def restore(self, record: SampleResult, value: bytes) -> None:
        """Write the completed record's value again under its key, byte for byte."""
        await self._send(record, record.key, value)

    def _reduce(self, record: SampleResult, size: int) -> tuple[SampleResult, bytes]:
        reduced, value = reduce_to(record, self._encode, size)
        log.warning(
            "sample %s epoch %s is stored reduced to %d bytes: %s",
            record.sample_id,
            record.epoch,
            len(value),
            reduced.truncated,
        )
        return reduced, value

    def _encode(self, record: SampleResult) -> bytes:
        return self._codec.encode_sample_result(record, self.topic)

    async def _encoded(self, record: SampleResult) -> bytes:
        if self._codec.wire_format is WireFormat.REGISTRY:
            # Encoding may ask the registry (bounded, but seconds): never on the event loop.
            return await asyncio.to_thread(self._encode, record)
        return self._encode(record)

    async def _send(self, record: SampleResult, key: bytes, value: bytes) -> None:
        """Produce one message to the record's partition and wait for its acknowledgement."""
        loop = asyncio.get_running_loop()
        delivered: asyncio.Future[None] = loop.create_future()

        def on_delivery(error: KafkaError | None, _message: Message) -> None:
            denied = self._denied(error)
            loop.call_soon_threadsafe(_settle, delivered, error, record, denied)

        self._binding.check()  # never a record into a topic known to be another
        partition = partition_for(record.run_key, self._partitions)
        try:
            produce(
                self._producer, self.topic, key, value, partition=partition, on_delivery=on_delivery
            )
        except KafkaClientError as exc:
            denied = self._denied(exc)  # after a denied delivery, the next produce() is refused
            if denied is not None:
                raise PersistenceError(denied, retriable=False) from exc
            raise _persistence_error(record, str(exc), len(value)) from exc
        await delivered
        self._binding.check()  # acknowledged, but perhaps by the re-created topic

    def _denied(self, error: KafkaError | KafkaClientError | None) -> str | None:
        """The one-line denial if Kafka refused this principal the write."""
        return access_denied(self._kafka.settings, error, "WRITE", f"topic {self.topic}")

    async def load(self, run_key: RunKey) -> RunRecords | LoadedViews:
        """Read the fold views of the run key's latest records (in a thread: the read blocks)."""
        return await asyncio.to_thread(read_run_views, self._kafka, run_key)

    async def close(self) -> None:
        """Flush what is in flight and stop the poll thread; raise TopicRecreatedError if
        the topic is no longer the one the store opened (what was written is not in it)."""
        await asyncio.to_thread(self._producer.flush, 30)
        self._closing.set()
        self._poller.join()
        self._binding.close()
        await asyncio.to_thread(self._binding.check_now)

    def _poll_loop(self) -> None:
        while not self._closing.is_set():
            self._producer.poll(0.05)


def _settle(
    delivered: asyncio.Future[None],
    error: KafkaError | None,
    record: SampleResult,
    denied: str | None,
) -> None:
    if delivered.done():
        return
    if error is None:
        delivered.set_result(None)
    elif denied is not None:  # retrying cannot help until an admin grants the ACL
        delivered.set_exception(PersistenceError(denied, retriable=False))
    else:
        delivered.set_exception(_persistence_error(record, error.str(), None, error))


class _TooLargeError(PersistenceError):
    """The producer or the broker refused a message as too large."""


def _persistence_error(
    record: SampleResult, reason: str, size: int | None, error: KafkaError | None = None
) -> PersistenceError:
    where = f"sample {record.sample_id} epoch {record.epoch}"
    too_large = error is not None and error.code() in _TOO_LARGE
    if too_large or "too large" in reason.lower():
        size_text = f" ({size} bytes)" if size is not None else ""
        return _TooLargeError(
            f"record for {where}{size_text} is larger than the broker accepts: {reason}",
            retriable=False,
        )
    return PersistenceError(f"writing {where} failed: {reason}")


_TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})


def _max_message_bytes(kafka: KafkaConnection, topic: str) -> int:
    """The topic's max.message.bytes; refused in one line when it cannot be read.

    Never a guess: a smaller default would cut records the topic accepts whole, a larger one
    would have the broker refuse them.
    """
    try:
        return int(topic_config(kafka, topic)["max.message.bytes"])
    except TopicError as exc:
        denied = access_denied(kafka.settings, exc, "DESCRIBE_CONFIGS", f"topic {topic}")
        first = str(exc).splitlines()[0]
        reason = (
            denied or f"cannot read max.message.bytes of topic {topic} ({first}); refusing to guess"
        )
        raise PersistenceError(reason, retriable=False) from exc
    except (KeyError, ValueError) as exc:
        raise PersistenceError(
            f"topic {topic} reports no usable max.message.bytes ({exc!r}); refusing to guess",
            retriable=False,
        ) from exc
