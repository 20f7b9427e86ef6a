"""The state stores' participant: flushes (and so writes the changelog of) stale stores, and
follows the changelog topic to a new one (deleted and re-created), each store's state written
whole to it by its next flush."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from resultlog.consumers.aggregator._layout import LayoutWatch
from resultlog.consumers.aggregator._state import Shared
from resultlog.consumers.aggregator.participants._base import Participant
from resultlog.consumers.aggregator.store import KafkaChangelog

__all__ = ["StoreFlush"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class StoreFlush(Participant):
    """Flushes the stores not flushed for `interval_s`: a restart reads a short tail."""

    shared: Shared
    interval_s: float
    layout: LayoutWatch | None = None
    changelog: KafkaChangelog | None = None

    def poll(self, now: float) -> None:
        """Follow the changelog to a new topic; flush the stores that are due."""
        self._follow_changelog()
        with self.shared.lock:
            self.shared.state.save(self.interval_s)

    def _follow_changelog(self) -> None:
        """A changelog of another topic ID is a new one: every store writes itself whole to
        it before any other flush (`PartitionStore.whole_due`)."""
        changelog, layout = self.changelog, self.layout
        if changelog is None or layout is None:
            return
        seen = layout.seen_changelog_id
        if seen and seen != changelog.topic_id:
            log.warning(
                "%s was deleted and re-created (topic ID %s, was %s): writing each "
                "partition's state whole to it", changelog.topic, seen, changelog.topic_id,
            )  # fmt: skip
            changelog.moved_to(seen)
