"""Result stores: where a worker makes each finished (sample, epoch) durable."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from confluent_kafka import KafkaError, Message

from resultlog.consumers import RunRecords, read_run_records
from resultlog.kafka import KafkaClientError, KafkaConnection, produce
from resultlog.producer.errors import PersistenceError
from resultlog.schemas import RunKey, SampleResult, WireFormat, encode_key, partition_for

__all__ = ["KafkaResultStore", "NoopResultStore", "ResultStore"]

_CONNECT_TIMEOUT_S = 15.0


class ResultStore(Protocol):
    """Durable per-(sample, epoch) records of runs."""

    async def write(self, record: SampleResult) -> None:
        """Return only once the record is durable; raise PersistenceError otherwise."""
        ...

    async def load(self, run_key: RunKey) -> RunRecords:
        """The latest record of every (sample, epoch) of the run key, and the undecodable count."""
        ...

    async def close(self) -> None:
        """Release resources after making every write durable."""
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
    """Writes records to the compacted results topic, one partition per run key."""

    def __init__(
        self, kafka: KafkaConnection, *, producer_overrides: Mapping[str, Any] | None = None
    ) -> None:
        self.topic = kafka.results_topic
        self._kafka = kafka
        self._codec = kafka.codec
        self._producer = kafka.durable_producer(producer_overrides)
        try:
            self._partitions = kafka.partition_count(
                self.topic, self._producer, timeout_s=_CONNECT_TIMEOUT_S
            )
        except KafkaClientError as exc:
            raise PersistenceError(str(exc)) from exc
        self._closing = threading.Event()
        # Delivery reports are only served from poll()/flush(): a thread keeps polling.
        self._poller = threading.Thread(target=self._poll_loop, name="resultlog-poll", daemon=True)
        self._poller.start()

    async def write(self, record: SampleResult) -> None:
        """Produce the record and wait for the broker's acknowledgement (acks=all)."""
        loop = asyncio.get_running_loop()
        delivered: asyncio.Future[None] = loop.create_future()

        def on_delivery(error: KafkaError | None, _message: Message) -> None:
            loop.call_soon_threadsafe(_settle, delivered, error, record)

        if self._codec.wire_format is WireFormat.REGISTRY:
            # Encoding may ask the registry (bounded, but seconds): never on the event loop.
            value = await asyncio.to_thread(self._codec.encode_sample_result, record, self.topic)
        else:
            value = self._codec.encode_sample_result(record, self.topic)
        run_key = record.run_key
        key = encode_key(run_key, record.sample_index, record.epoch)
        partition = partition_for(run_key, self._partitions)
        try:
            produce(
                self._producer, self.topic, key, value, partition=partition, on_delivery=on_delivery
            )
        except KafkaClientError as exc:
            raise _persistence_error(record, str(exc), len(value)) from exc
        await delivered

    async def load(self, run_key: RunKey) -> RunRecords:
        """Read the run key's latest records (in a thread: the read blocks)."""
        return await asyncio.to_thread(read_run_records, self._kafka, run_key)

    async def close(self) -> None:
        """Flush what is in flight and stop the poll thread."""
        await asyncio.to_thread(self._producer.flush, 30)
        self._closing.set()
        self._poller.join()

    def _poll_loop(self) -> None:
        while not self._closing.is_set():
            self._producer.poll(0.05)


def _settle(
    delivered: asyncio.Future[None], error: KafkaError | None, record: SampleResult
) -> None:
    if delivered.done():
        return
    if error is None:
        delivered.set_result(None)
    else:
        delivered.set_exception(_persistence_error(record, error.str(), None, error))


def _persistence_error(
    record: SampleResult, reason: str, size: int | None, error: KafkaError | None = None
) -> PersistenceError:
    where = f"sample {record.sample_id} epoch {record.epoch}"
    too_large = error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE
    if too_large or "too large" in reason.lower():
        size_text = f" ({size} bytes)" if size is not None else ""
        return PersistenceError(
            f"record for {where}{size_text} is larger than the broker accepts: {reason}",
            retriable=False,
        )
    return PersistenceError(f"writing {where} failed: {reason}")
