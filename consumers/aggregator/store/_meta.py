"""What a store says it holds (its meta entry, also each changelog flush's marker), the log
it comes from, and the phases of its flush to the changelog."""

from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass

from resultlog.consumers.aggregator.store._codec import GENERATION_KEY, StoreFormatError

__all__ = ["FORMAT", "GENERATION_KEY", "FlushPhase", "LogIdentity", "StoreMeta"]

FORMAT = 4  # 4: changelog values carry their writer's tag, the meta names the writer


@dataclass(frozen=True)
class LogIdentity:
    """The exact log a piece of state comes from: cluster, topic (by id), partition count."""

    cluster_id: str
    topic: str
    topic_id: str
    partitions: int


@dataclass(frozen=True)
class StoreMeta:
    """What a store says it holds: whose partition, up to which results offset, written when,
    and up to which changelog offset (`restoring`: a restore from the changelog began and must
    be finished before the data is used). A changelog's flush markers carry one too."""

    format: int
    identity: LogIdentity
    partition: int
    next_offset: int
    written_at_ms: int
    changelog_offset: int = 0
    changelog_id: str = ""  # the changelog topic's ID: offsets of another one mean nothing
    restoring: bool = False
    runs: int = -1  # runs with totals in the store (-1: not counted): a restore checks it
    generation: str = ""  # the changelog generation it belongs to ("": none, never whole)
    writer: str = ""  # the tag (hex) of the writer of the flush it ends ("": unknown)

    def backed_by(self, changelog_id: str, low: int, high: int) -> bool:
        """Whether the changelog of that ID, its offsets now [low, high], holds what this
        store holds from its changelog offset on."""
        return self.changelog_id == changelog_id and low <= self.changelog_offset <= high

    def encode(self) -> bytes:
        """The meta entry's bytes."""
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> StoreMeta:
        """The meta entry; StoreFormatError if it is not one this version writes."""
        try:
            body = json.loads(raw)
            identity = LogIdentity(**body.pop("identity"))
            meta = cls(identity=identity, **body)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise StoreFormatError(f"an undecodable meta entry: {exc!r}") from exc
        if meta.format != FORMAT:
            raise StoreFormatError(f"format {meta.format}, this version reads {FORMAT}")
        return meta


class FlushPhase(enum.Enum):
    """Where a store's flush to its changelog stands (one flush in flight at a time)."""

    IDLE = "idle"  # nothing in flight: the next flush goes when due
    IN_FLIGHT = "in_flight"  # sent, not yet acknowledged: memory holds its values
    FAILED = "failed"  # a send failed: its entries go with the next flush, after a pause
