"""The run index's participant: publishes it, and restores or drops a partition's intervals."""

from __future__ import annotations

from resultlog.consumers._index_codec import IndexedLog
from resultlog.consumers.aggregator._index import RunIndexWriter
from resultlog.consumers.aggregator._state import Shared
from resultlog.consumers.aggregator.participants._base import (
    Adoption,
    Participant,
    Revocation,
    positions,
)

__all__ = ["RunIndex"]


class RunIndex(Participant):
    """Drives the run index writer (the ingest step notes the records it folds there)."""

    def __init__(self, shared: Shared, writer: RunIndexWriter) -> None:
        self._shared = shared
        self._writer = writer

    def poll(self, now: float) -> None:
        """Produce what is due, up to the read positions."""
        self._writer.tick(positions(self._shared))

    def adopted(self, adoption: Adoption) -> None:
        """Index the partition from where its state starts, of the log it folds."""
        identity = adoption.identity
        self._writer.identify(
            None
            if identity is None
            else IndexedLog(identity.topic, identity.cluster_id, identity.topic_id)
        )
        low, start = adoption.low, adoption.start
        self._writer.assign(adoption.partition, low, low if start is None else start)

    def revoked(self, revocation: Revocation) -> None:
        """Forget the partitions, first publishing up to their positions if revoked."""
        for partition in sorted(revocation.partitions):
            position = revocation.positions.get(partition) if revocation.publishes else None
            self._writer.revoke(partition, position)

    def close(self) -> None:
        """Deliver what is queued."""
        self._writer.close()
