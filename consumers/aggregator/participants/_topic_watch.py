"""The topics' participant: stops on a layout mismatch, rebuilds once the results topic is
another log (deleted and re-created: its offsets are not the ones the state folds)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from resultlog.consumers.aggregator._layout import MISSING, LayoutWatch
from resultlog.consumers.aggregator._state import Shared
from resultlog.consumers.aggregator.participants._base import Adoption, Participant
from resultlog.consumers.aggregator.participants._reconciliation import Reconciliation

__all__ = ["TopicWatch"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class TopicWatch(Participant):
    """Acts on what the layout watch (a thread of its own) found; `rebuild` drops every
    partition, publishing nothing, and takes them again."""

    shared: Shared
    layout: LayoutWatch
    reconciliation: Reconciliation
    _: KW_ONLY
    topic: str
    rebuild: Callable[[], None]
    _topic_id: str | None = field(default=None, init=False)  # the one the state folds
    # An adoption found another topic ID: rebuild everything.
    _recreated: bool = field(default=False, init=False)
    # The partitions served stale while the topic is missing.
    _missing: set[int] = field(default_factory=set, init=False)

    def poll(self, now: float) -> None:
        """Raise the layout mismatch found; act on the results topic's ID."""
        if self.layout.failure is not None:
            raise self.layout.failure
        self._watch_topic_id()

    def adopted(self, adoption: Adoption) -> None:
        """Note the results topic's ID the adopted partition folds; partitions held from
        before of another ID are rebuilt next."""
        identity = adoption.identity
        if identity is None:
            return
        if self._topic_id and identity.topic_id != self._topic_id:
            self.reconciliation.other_log([adoption.partition])
            with self.shared.lock:
                self._recreated = any(p != adoption.partition for p in self.shared.state.partitions)
        self._topic_id = identity.topic_id

    def _watch_topic_id(self) -> None:
        """Rebuild everything once the results topic has another ID (deleted and re-created:
        another log); while it is missing, serve what is held marked stale."""
        seen, known = self.layout.seen_id, self._topic_id
        state = self.shared.state
        if self._recreated or (seen and known and seen != known):
            log.warning(
                "%s was deleted and re-created (topic ID %s, was %s): rebuilding its state",
                self.topic, seen, known,
            )  # fmt: skip
            self._topic_id = seen or known  # rebuilt once, even if its ID cannot be read now
            self._recreated = False
            self._missing.clear()
            self.rebuild()
        elif seen == MISSING and known:
            with self.shared.lock:
                for number, partition in state.partitions.items():
                    if partition.caught_up:  # served from the summaries topic, stale
                        partition.caught_up = False
                        self._missing.add(number)
        elif seen == known and self._missing:  # it was not gone after all (a failed look)
            with self.shared.lock:
                for number in self._missing:
                    if number in state.partitions:
                        state.partitions[number].caught_up = True
            self._missing.clear()
