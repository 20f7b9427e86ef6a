"""One budget for every writer of a run key: admission through the spend ledger on Kafka.

Each writer (a chunk on some worker) reserves a pair in the ledger before its model call and
settles it with the key's spend after. A pair starts only if the run key's spend (every
pair's, from the results log and the ledger, whichever is larger) plus every reservation
that came before its own in the ledger, plus its own, stays within the budget. So however
many workers, chunks and re-submits share the run key, the spend passes the budget by at most
what the pairs in flight cost beyond their reservations.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator
from fractions import Fraction

from resultlog.consumers import read_run_views
from resultlog.kafka import KafkaConnection
from resultlog.producer._budget import AdmissionFactory, Pair, bounded_estimate, verdict
from resultlog.producer.spend import Seen, SpendLedger, open_ledger
from resultlog.schemas import RunKey

__all__ = ["SharedBudget", "shared_budget"]

log = logging.getLogger(__name__)

_WAIT_S = 1.0  # how long a waiting writer listens to the ledger before it looks again


class SharedBudget:
    """A run key's budget as one writer keeps it, through the ledger."""

    def __init__(
        self,
        ledger: SpendLedger,
        durable: dict[Pair, Fraction],
        *,
        limit_usd: float,
        probe: int,
        max_pair_usd: float | None,
        ttl_s: float,
    ) -> None:
        """`durable`: each pair's spend in the results log when the run started."""
        self.ledger = ledger
        self.limit = Fraction(limit_usd)
        self.max_pair = Fraction(max_pair_usd) if max_pair_usd is not None else None
        self._durable = durable
        self._probe = probe
        self._ttl_s = ttl_s
        self._mine: dict[Pair, Fraction] = {}  # this writer's pairs in flight: their spend before
        # Kept as the ledger is read, so an admission costs the pairs in flight, not the run.
        self._spend = dict(durable)  # per pair, the larger of the results log's and the ledger's
        self._total = sum(durable.values(), Fraction(0))
        self._known = max(durable.values(), default=Fraction(0))  # the most one key has cost
        self._ran = set(durable)  # the pairs whose cost a model call made known
        self._open: dict[Pair, Seen] = {}  # the ledger's reservations

    async def admit(self, pair: Pair, spent: Fraction) -> bool:
        """Reserve the pair in the ledger once the budget has room for it; False: never."""
        while (decided := await asyncio.to_thread(self._attempt, pair, spent)) is None:
            await asyncio.to_thread(self.ledger.read_some, _WAIT_S)  # a pair in flight ends
        return decided

    def _attempt(self, pair: Pair, spent: Fraction) -> bool | None:
        """One try at admitting the pair (in a thread: it waits for Kafka); None: wait."""
        self.ledger.read_some(0.0)
        if (dry := self.decide(pair)) is not True:  # counting every reservation
            return dry
        amount = float(self.estimate()[0])
        offset = self.ledger.reserve(pair, float(spent), amount, self._ttl_s)
        self._mine[pair] = spent
        self.ledger.read_through(offset)
        if (decided := self.decide(pair, before=offset)) is not True:
            # Another writer reserved first: withdraw, then wait for it or stop.
            self.ledger.settle(pair, float(self._mine.pop(pair)), ran=False)
        return decided

    async def settle(self, pair: Pair, added: Fraction, spent: Fraction) -> None:
        """Record the pair's spend after its outcome: its reservation ends."""
        await asyncio.to_thread(self.ledger.settle, pair, float(spent))
        self._mine.pop(pair, None)

    async def close(self) -> None:
        """Withdraw the reservations of pairs that never finished (a cancelled run)."""
        for pair in list(self._mine):
            # Best effort: a reservation not withdrawn stops counting once it expires.
            with contextlib.suppress(Exception):
                await self._withdraw(pair)

    def decide(self, pair: Pair, before: int | None = None) -> bool | None:
        """The verdict on `pair`, counting the live reservations of other pairs (only those
        before offset `before` once the pair has reserved there)."""
        self._refresh()
        now_ms = int(time.time() * 1000)
        estimate, probing = self.estimate()
        reserved = [
            max(Fraction(seen.entry.reserved), estimate)
            for key, seen in self._open.items()
            if key != pair
            and seen.entry.expires_ms > now_ms
            and (before is None or seen.offset < before)
        ]
        return verdict(self.limit, self.spent(), reserved, estimate, probing=probing)

    def spent(self) -> Fraction:
        """The run key's spend: per pair, the larger of the results log's and the ledger's."""
        self._refresh()
        return self._total

    def estimate(self) -> tuple[Fraction, bool]:
        """What a pair may cost (the most one key has cost), and whether to probe."""
        self._refresh()
        return bounded_estimate(self._known, self.max_pair, len(self._ran) < self._probe)

    def _refresh(self) -> None:
        """Take in the pairs the ledger has read since the last look."""
        changed, self.ledger.changed = self.ledger.changed, []
        for pair in changed:
            seen = self.ledger.pairs.get(pair)
            ledger = Fraction(seen.entry.spent) if seen is not None else Fraction(0)
            spend = max(self._durable.get(pair, Fraction(0)), ledger)
            self._total += spend - self._spend.get(pair, Fraction(0))
            self._spend[pair] = spend
            self._known = max(self._known, spend)
            if seen is not None and seen.entry.state == "reserved":
                self._open[pair] = seen
            else:
                self._open.pop(pair, None)
            if seen is not None and seen.entry.state == "settled" and seen.entry.ran:
                self._ran.add(pair)

    async def _withdraw(self, pair: Pair) -> None:
        spent = self._mine.pop(pair)
        await asyncio.to_thread(
            functools.partial(self.ledger.settle, pair, float(spent), ran=False)
        )


def shared_budget(kafka: KafkaConnection, *, max_pair_usd: float | None = None) -> AdmissionFactory:
    """The factory of a run key's shared budget, for `RunBudget(shared=...)`."""

    @contextlib.asynccontextmanager
    async def opened(run_key: RunKey, limit_usd: float, probe: int) -> AsyncIterator[SharedBudget]:
        durable = await asyncio.to_thread(_durable_spend, kafka, run_key)
        holder = secrets.token_hex(8)
        with open_ledger(kafka, run_key, holder) as ledger:
            budget = SharedBudget(
                ledger,
                durable,
                limit_usd=limit_usd,
                probe=probe,
                max_pair_usd=max_pair_usd,
                ttl_s=_reservation_ttl_s(kafka),
            )
            try:
                yield budget
            finally:
                await budget.close()

    return opened


def _durable_spend(kafka: KafkaConnection, run_key: RunKey) -> dict[Pair, Fraction]:
    """Each pair's spend in the results log (every sample of the run key, not one chunk's)."""
    loaded = read_run_views(kafka, run_key)
    return {(r.sample_index, r.epoch): Fraction(r.spent) for r in loaded.records}


def _reservation_ttl_s(kafka: KafkaConnection) -> float:
    """How long a reservation counts: the longest a pair's model requests may take.

    A writer that died with a pair in flight leaves its reservation behind; it stops counting
    after this, and the pair's spend, which no record holds, is lost with the writer.
    """
    settings = kafka.settings
    attempts = settings.model_max_retries + 1
    backoff = settings.model_retry_backoff_s * (2**attempts)
    return float(settings.model_timeout_s * attempts + backoff + 60.0)
