"""A run's budget: no new pair starts once the run key's spend would pass it (design rule 11).

The spend is exact (Fractions): the log's latest records' `spent_cost` at start, then each
finished pair's change to its key's. A re-run therefore starts from exactly the spend the
stopped run ended with, and with an estimate at least as large, so it starts nothing either.
Pairs in flight are accounted for: each reserves the most any one pair has cost so far.
"""

from __future__ import annotations

import asyncio
from fractions import Fraction

__all__ = ["Budget"]


class Budget:
    """Admits pairs while the spend, with a reservation per pair in flight, stays within it."""

    def __init__(self, limit_usd: float, *, spent: Fraction, estimate: float, probe: int) -> None:
        """`spent`: the durable spend; `estimate`: the most one key has cost (from the log);
        `probe`: how many pairs run one at a time while no pair's cost is known."""
        self.limit = Fraction(limit_usd)
        self.spent = spent
        self.estimate = Fraction(estimate)
        self.in_flight = 0
        self._probe = probe
        self._changed = asyncio.Event()

    async def admit(self) -> bool:
        """Wait until a new pair may start (True) or never will (False: the budget is spent)."""
        while (verdict := self._verdict()) is None:
            self._changed.clear()
            await self._changed.wait()
        if verdict:
            self.in_flight += 1
        return verdict

    def settle(self, added: Fraction) -> None:
        """A pair admitted earlier has finished: its key's spend grew by `added`."""
        self.in_flight -= 1
        self.spent += added
        self.estimate = max(self.estimate, added)
        self._probe -= 1
        self._changed.set()

    def _verdict(self) -> bool | None:
        """True: start one; False: stop; None: wait for a pair in flight to finish."""
        if self.in_flight and not self.estimate and self._probe > 0:
            return None  # learn what a pair costs before pairs run side by side
        committed = self.spent + self.in_flight * self.estimate
        if committed < self.limit and committed + self.estimate <= self.limit:
            return True
        # Pairs in flight may cost less than reserved: decide once they have finished.
        return None if self.in_flight else False
