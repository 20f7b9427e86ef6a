"""The bounded write policy: 4 attempts, exponential backoff from 200 ms with jitter."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from resultlog.producer.errors import PersistenceError, TopicRecreatedError
from resultlog.producer.store import ResultStore
from resultlog.schemas import SampleResult

__all__ = ["WritePolicy"]

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class WritePolicy:
    """How often and how patiently a record write is retried before the run fails."""

    attempts: int = 4
    initial_delay_s: float = 0.2
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def delay(self, attempt: int) -> float:
        """Backoff before retry number `attempt` (1-based), jittered by +-50%."""
        return float(self.initial_delay_s * 2 ** (attempt - 1) * self.rng.uniform(0.5, 1.5))

    async def write(self, store: ResultStore, record: SampleResult) -> None:
        """Write the record, retrying failures; raise PersistenceError when out of attempts."""
        where = f"sample {record.sample_id} epoch {record.epoch}"
        await self.retry(f"persist {where}", lambda: store.write(record))

    async def retry(self, what: str, action: Callable[[], Awaitable[T]]) -> T:
        """Run `action`, retrying failures; raise PersistenceError saying it could not `what`."""
        for attempt in range(1, self.attempts + 1):
            try:
                return await action()
            except TopicRecreatedError:
                raise  # its own line says what happened and what to do
            except Exception as exc:  # any store's failure counts, not only Kafka's
                retriable = not isinstance(exc, PersistenceError) or exc.retriable
                if not retriable or attempt == self.attempts:
                    raise PersistenceError(
                        f"could not {what} after {attempt} attempt(s): {exc}",
                        retriable=False,
                    ) from exc
                delay = self.delay(attempt)
                log.warning("could not %s (%s); retrying in %.2fs", what, exc, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable: attempts >= 1")
