"""A run's budget: no new pair starts once the run key's spend would pass it (design rule 11).

The spend is exact (Fractions): the log's latest records' `spent_cost` at start, then each
finished pair's change to its key's. A re-run therefore starts from exactly the spend the
stopped run ended with, and with an estimate at least as large, so it starts nothing either.
Pairs in flight are accounted for: each reserves the most any one pair has cost so far.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from fractions import Fraction
from typing import Protocol

from resultlog.schemas import RunKey

__all__ = ["Admission", "AdmissionFactory", "Budget", "bounded_estimate", "verdict"]

Pair = tuple[int, int]  # (sample_index, epoch)


class Admission(Protocol):
    """What decides whether a run may start its next pair, and learns what each one cost."""

    async def admit(self, pair: Pair, spent: Fraction) -> bool:
        """Wait until `pair` (whose key has cost `spent` so far) may start (True) or none
        may any more (False)."""
        ...

    async def settle(self, pair: Pair, added: Fraction, spent: Fraction) -> None:
        """An admitted pair has finished: its key's spend grew by `added`, to `spent`."""
        ...


# Opens a run key's shared budget for one run: (run key, limit in USD, probe).
AdmissionFactory = Callable[[RunKey, float, int], AbstractAsyncContextManager[Admission]]


def verdict(
    limit: Fraction,
    spent: Fraction,
    reserved: Sequence[Fraction],
    estimate: Fraction,
    *,
    probing: bool,
) -> bool | None:
    """Whether one more pair may start: True, False (never: the budget is spent) or None (wait
    for a pair in flight to finish).

    `spent` is the durable spend, `reserved` what each pair in flight may cost, `estimate`
    what the new one may; while `probing`, pairs run one at a time to learn what one costs.
    """
    if reserved and probing:
        return None  # learn what a pair costs before pairs run side by side
    committed = spent + sum(reserved, Fraction(0))
    if committed < limit and committed + estimate <= limit:
        return True
    # Pairs in flight may cost less than reserved: decide once they have finished.
    return None if reserved else False


class Budget:
    """Admits pairs while the spend, with a reservation per pair in flight, stays within it."""

    def __init__(
        self,
        limit_usd: float,
        *,
        spent: Fraction,
        estimate: float,
        probe: int,
        max_pair_usd: float | None = None,
    ) -> None:
        """`spent`: the durable spend; `estimate`: the most one key has cost (from the log);
        `probe`: how many pairs run one at a time while no pair's cost is known, unless
        `max_pair_usd` bounds what an unknown pair may cost."""
        self.limit = Fraction(limit_usd)
        self.spent = spent
        self.estimate = Fraction(estimate)
        self.max_pair = Fraction(max_pair_usd) if max_pair_usd is not None else None
        self.in_flight = 0
        self._probe = probe
        self._changed = asyncio.Event()

    async def admit(self, pair: Pair = (0, 0), spent: Fraction = Fraction(0)) -> bool:
        """Wait until a new pair may start (True) or never will (False: the budget is spent)."""
        while (decided := self._verdict()) is None:
            self._changed.clear()
            await self._changed.wait()
        if decided:
            self.in_flight += 1
        return decided

    async def settle(self, pair: Pair, added: Fraction, spent: Fraction = Fraction(0)) -> None:
        """A pair admitted earlier has finished: its key's spend grew by `added`."""
        self.in_flight -= 1
        self.spent += added
        self.estimate = max(self.estimate, added)
        self._probe -= 1
        self._changed.set()

    def _verdict(self) -> bool | None:
        estimate, probing = bounded_estimate(self.estimate, self.max_pair, self._probe > 0)
        return verdict(
            self.limit, self.spent, [estimate] * self.in_flight, estimate, probing=probing
        )


def bounded_estimate(
    known: Fraction, max_pair: Fraction | None, may_probe: bool
) -> tuple[Fraction, bool]:
    """What a pair may cost, and whether pairs must still run one at a time to learn it.

    A known cost is the most one key has cost; without one, `max_pair` (--max-pair-usd)
    stands in for it; without either, the first pairs run alone (probing).
    """
    if known:
        return known, False
    if max_pair is not None:
        return max_pair, False
    return known, may_probe
