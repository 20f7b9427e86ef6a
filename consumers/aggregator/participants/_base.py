"""The participant protocol: what the consumer loop drives besides its ingest step.

Each pass of the loop ingests one batch, then polls every participant in a fixed order. The
partitions' life (`_partitions`) tells every participant what happens to the assigned
partitions: a revocation before the state drops them (their runs and read positions are still
there), an adoption after the state holds the restored partition. Every hook is a no-op here:
a participant overrides only what it needs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from resultlog.consumers._ingest import Ingested
from resultlog.consumers.aggregator._state import Shared
from resultlog.consumers.aggregator.store import LogIdentity

__all__ = ["Adoption", "Bounds", "Participant", "Revocation", "Why", "overriding", "positions"]

Bounds = tuple[int, int | None]  # a partition's low and high watermarks when it was taken


class Why(Enum):
    """Why partitions are dropped."""

    REVOKED = "revoked"  # handed over in a rebalance: what is pending is published first
    LOST = "lost"  # another member may own them already: nothing published, nothing flushed
    RECREATED = "recreated"  # the results topic is another log now: nothing published


@dataclass(frozen=True)
class Revocation:
    """Partitions about to be dropped: the state still holds them."""

    partitions: frozenset[int]
    why: Why
    positions: Mapping[int, int]  # per assigned partition: the next offset to read

    @property
    def publishes(self) -> bool:
        """Whether what is pending for them is published before they are dropped."""
        return self.why is Why.REVOKED


@dataclass(frozen=True)
class Adoption:
    """A partition whose store is restored: the state holds it, reading starts at `start`."""

    partition: int
    low: int  # the partition's low watermark when it was taken
    start: int | None  # None: no usable state, the partition is re-folded from `low`
    identity: LogIdentity | None  # the results log the store folds (None: unknown)


class Participant:
    """One subsystem the consumer loop drives: polled once a pass, told of the partitions'
    life and of the loop's end. Only the consumer thread calls these."""

    def poll(self, now: float) -> None:
        """Do a pass's share of work (`now`: time.monotonic())."""

    def deadline(self) -> float:
        """The monotonic time by which the next poll is wanted (the loop waits no longer)."""
        return math.inf

    def ingested(self, items: Sequence[Ingested]) -> None:
        """A batch was folded (all of it, in offset order per partition)."""

    def assigned(self, bounds: Mapping[int, Bounds]) -> None:
        """Partitions were taken, paused while their stores restore."""

    def adopted(self, adoption: Adoption) -> None:
        """A partition's store is restored; the loop reads it next."""

    def revoked(self, revocation: Revocation) -> None:
        """Partitions are about to be dropped (revoked, lost or of another log)."""

    def finish(self) -> None:
        """The loop is stopping: it still holds its partitions, then leaves the group."""

    def close(self) -> None:
        """After the loop left the group (and dropped its partitions): flush and release."""

    def abandon(self) -> None:
        """After a failure, once the group consumer is closed: release, publishing nothing."""


def positions(shared: Shared) -> dict[int, int]:
    """Per assigned partition: the next offset to read (every record below is applied)."""
    with shared.lock:
        return {p: state.position for p, state in shared.state.partitions.items()}


def overriding(participants: Sequence[Participant], hook: str) -> list[Participant]:
    """The participants that override `hook`: the others' no-op is not worth a call a pass."""
    default = getattr(Participant, hook)
    return [p for p in participants if getattr(type(p), hook) is not default]
