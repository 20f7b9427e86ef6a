"""The summaries topic's participant: served marked stale while a partition restores, then
corrected where it disagrees with the folds (see `_reconcile`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from resultlog.consumers.aggregator._reconcile import SummaryWatcher
from resultlog.consumers.aggregator._state import Shared, utc_now
from resultlog.consumers.aggregator.participants._base import (
    Bounds,
    Participant,
    Revocation,
    Why,
)
from resultlog.consumers.summaries import SummaryPublisher

__all__ = ["Reconciliation"]

log = logging.getLogger(__name__)


class Reconciliation(Participant):
    """Reads the owned partitions' summaries topic: serves it, then corrects it."""

    def __init__(self, shared: Shared, watcher: SummaryWatcher, publisher: SummaryPublisher):
        self._shared = shared
        self._watcher = watcher
        self._publisher = publisher

    def poll(self, now: float) -> None:
        """Take what arrived; correct what others wrote on caught-up partitions."""
        self._watcher.poll()
        state = self._shared.state
        with self._shared.lock:
            for number, partition in state.partitions.items():
                if not partition.caught_up:  # served marked stale until caught up
                    partition.stale = self._watcher.held(number)
            found = self._watcher.corrections(state, utc_now())
            for run_key in found.republish:
                state.republish(run_key)
        if found.republish or found.tombstones:
            log.info(
                "correcting the summaries topic: %d republished, %d tombstoned",
                len(found.republish),
                len(found.tombstones),
            )
        self._publisher.publish((run_key, None) for run_key in found.tombstones)

    def assigned(self, bounds: Mapping[int, Bounds]) -> None:
        """While their stores restore: serve the partitions' summaries topic's summaries
        (read as they arrive), marked stale, until the partitions caught up."""
        if not bounds:
            return
        self._watcher.assign(list(bounds))
        state = self._shared.state
        with self._shared.lock:
            for partition, (low, high) in bounds.items():
                state.assign(partition, low, high)
                placeholder = state.partitions[partition]
                placeholder.caught_up = False
                placeholder.stale = self._watcher.held(partition)

    def revoked(self, revocation: Revocation) -> None:
        """Stop reading the partitions; after a re-creation what they held is of the old log."""
        self._watcher.revoke(set(revocation.partitions))
        if revocation.why is Why.RECREATED:
            # Its summaries name offsets of the deleted log.
            self._watcher.other_log(sorted(revocation.partitions))

    def other_log(self, partitions: list[int]) -> None:
        """What these partitions' summaries topic holds now is of a deleted results log."""
        self._watcher.other_log(partitions)

    def close(self) -> None:
        """Release the reader."""
        self._watcher.close()

    def abandon(self) -> None:
        """Release the reader."""
        self._watcher.close()
