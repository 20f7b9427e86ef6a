"""The state stores' participant: flushes (and so writes the changelog of) stale stores."""

from __future__ import annotations

from resultlog.consumers.aggregator._state import Shared
from resultlog.consumers.aggregator.participants._base import Participant

__all__ = ["StoreFlush"]


class StoreFlush(Participant):
    """Flushes the stores not flushed for `interval_s`: a restart reads a short tail."""

    def __init__(self, shared: Shared, interval_s: float) -> None:
        self._shared = shared
        self._interval_s = interval_s

    def poll(self, now: float) -> None:
        """Flush the stores that are due."""
        with self._shared.lock:
            self._shared.state.save(self._interval_s)
