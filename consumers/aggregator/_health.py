"""Readiness and per-partition progress of an aggregator, as /healthz reports them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Health", "PartitionHealth", "StandbyHealth"]


@dataclass(frozen=True)
class PartitionHealth:
    """Read progress of one assigned partition."""

    partition: int
    position: int
    high_watermark: int
    lag: int
    caught_up: bool
    runs: int
    restoring: tuple[int, int] | None = None  # its store restores: changelog read, of


@dataclass(frozen=True)
class StandbyHealth:
    """A partition this instance keeps warm for another: how far its copy has read."""

    partition: int
    owner: str  # the member serving it (its instance id, else its member id)
    changelog_offset: int  # the copy holds every flush below this offset
    changelog_end: int  # the changelog's end when last looked at

    @property
    def behind(self) -> int:
        """Changelog records the copy has not applied yet."""
        return max(0, self.changelog_end - self.changelog_offset)


@dataclass(frozen=True)
class Health:
    """Readiness: joined the group, holding partitions, and every one of them caught up."""

    running: bool
    joined: bool
    partitions: tuple[PartitionHealth, ...]
    standby: tuple[StandbyHealth, ...] = ()  # warm copies: never served, not in readiness
    moved_aside: tuple[str, ...] = ()  # stores RocksDB refused, moved aside (the newest few)

    @property
    def ready(self) -> bool:
        """True once every assigned partition has been re-folded up to its assignment HWM.

        An instance holding no partition serves no run (it lost them all, or the group has
        more members than partitions): it is not ready, so a load balancer skips it.
        """
        held = bool(self.partitions)
        return self.running and self.joined and held and all(p.caught_up for p in self.partitions)

    @property
    def status(self) -> str:
        """stopped, starting (not in the group yet), idle (no partition), rebuilding or ready."""
        if not self.running:
            return "stopped"
        if not self.joined:
            return "starting"
        if not self.partitions:
            return "idle"
        return "ready" if self.ready else "rebuilding"

    def as_json(self) -> dict[str, Any]:
        """The /healthz body."""
        return {
            "status": self.status,
            "ready": self.ready,
            "lag": sum(p.lag for p in self.partitions),
            "restoring": {
                str(p.partition): {"read": p.restoring[0], "of": p.restoring[1]}
                for p in self.partitions
                if p.restoring is not None
            },
            "partitions": {
                str(p.partition): {
                    "position": p.position,
                    "high_watermark": p.high_watermark,
                    "lag": p.lag,
                    "caught_up": p.caught_up,
                    "runs": p.runs,
                    "restoring": p.restoring is not None,
                }
                for p in self.partitions
            },
            "standby": {
                str(s.partition): {
                    "owner": s.owner,
                    "changelog_offset": s.changelog_offset,
                    "changelog_end": s.changelog_end,
                    "behind": s.behind,
                }
                for s in self.standby
            },
            "moved_aside": list(self.moved_aside),
        }

    def restoring_text(self) -> str:
        """Which partitions restore their state and how far, for people ("" if none)."""
        parts = [
            f"{p.partition} ({100 * p.restoring[0] // max(1, p.restoring[1])}%)"
            for p in self.partitions
            if p.restoring is not None
        ]
        return "restoring partitions " + ", ".join(parts) if parts else ""
