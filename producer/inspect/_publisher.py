"""resultlog's Kafka store on its own thread and event loop, for hooks on any event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from resultlog.consumers import read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.producer.lease import RunLease, claim_lease
from resultlog.producer.runner import WritePolicy
from resultlog.producer.store import KafkaResultStore
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings

__all__ = ["Publisher"]

T = TypeVar("T")


class Publisher:
    """Writes records durably (acks=all, idempotent, bounded retries); every call blocks.

    Inspect's hooks call it from a worker thread (anyio.to_thread), so the event loop of
    the eval never waits on Kafka, whichever async library runs it.
    """

    def __init__(self, settings: Settings, policy: WritePolicy | None = None) -> None:
        self._kafka = KafkaConnection(settings)
        self._policy = policy or WritePolicy()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="resultlog-inspect-publisher", daemon=True
        )
        self._thread.start()
        try:
            # Fails at once (PersistenceError) when the broker or the topic is missing.
            self._store = KafkaResultStore(self._kafka)
        except BaseException:
            self._stop()
            raise

    def publish(self, record: SampleResult) -> None:
        """Return once the broker acknowledged the record; PersistenceError when out of tries."""
        self._run(self._policy.write(self._store, record))

    def publish_all(self, records: Sequence[SampleResult], window: int = 256) -> Iterator[int]:
        """Write the records, up to `window` awaiting the broker at once; yield each batch's
        count once the broker acknowledged all of it."""
        for start in range(0, len(records), window):
            batch = records[start : start + window]
            self._run(self._write_all(batch))
            yield len(batch)

    async def _write_all(self, records: Sequence[SampleResult]) -> None:
        await asyncio.gather(*(self._policy.write(self._store, record) for record in records))

    def lease(self, run_key: RunKey, span: tuple[int, int]) -> RunLease:
        """Lease samples [start, end) of the run key (LeaseHeldError: another writer has them)."""
        return claim_lease(self._kafka, run_key, span)

    def records(self, run_key: RunKey) -> list[SampleResult]:
        """The run key's latest records on the topic."""
        return read_run_records(self._kafka, run_key).records

    def publish_degraded(self, run_key: RunKey, records: Iterable[SampleResult]) -> int:
        """Write degraded records one at a time, never over a completed one; return how many."""
        completed = {
            (r.sample_index, r.epoch)
            for r in read_run_records(self._kafka, run_key).records
            if not r.degraded
        }
        written = 0
        for record in sorted(records, key=lambda r: (r.sample_index, r.epoch)):
            if (record.sample_index, record.epoch) not in completed:
                self.publish(record)
                written += 1
        return written

    def close(self) -> None:
        """Flush what is in flight, then stop the thread."""
        try:
            self._run(self._store.close())
        finally:
            self._stop()

    def _run(self, work: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def _stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._kafka.close()
