"""Read back a partition's latest complete checkpoint, or say in one line why it cannot be used.

A checkpoint is used only if its header is the partition's newest, names this exact log (the
cluster ID, the results topic and its ID, partition and partition count), covers an offset
between the partition's log start and its high watermark, is younger than the results topic's
delete.retention.ms (older, tombstones in the tail may have been compacted away), and every
piece it names is there and decodes. Keys of any other shape are skipped, never fatal.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from resultlog.consumers.aggregator.checkpoint._codec import (
    MAX_GENERATION,
    CheckpointError,
    Header,
    OldCheckpointError,
    Piece,
    decode,
    header_key,
    parse_piece_key,
    restore_rows,
)
from resultlog.consumers.fold import Contribution
from resultlog.kafka import arrived
from resultlog.schemas import RunKey

__all__ = ["Bounds", "Found", "Restored", "Unusable", "read_checkpoints"]

log = logging.getLogger(__name__)
_READ_TIMEOUT_S = 60.0

Bounds = tuple[int, int | None]  # a results partition's log start and high watermark
_Log = tuple[str, int, tuple[str, str] | None]  # results topic, partitions, (cluster, topic ID)


@dataclass(frozen=True)
class Restored:
    """A usable checkpoint: each run's contributions of every record below `next_offset`."""

    next_offset: int
    rows: dict[RunKey, list[Contribution]]
    contributions: int


@dataclass(frozen=True)
class Unusable:
    """Why a partition's checkpoint is not used (`reason` is a metric label)."""

    reason: str
    detail: str


@dataclass
class Found:
    """What the checkpoints topic holds for one results partition."""

    outcome: Restored | Unusable
    generation: int = 0  # the highest generation seen: a new one must be higher
    stale: list[bytes] = field(default_factory=list)  # piece keys no complete header needs


@dataclass
class _Scan:
    header: Header | None = None
    corrupt: str | None = None  # the newest header record could not be decoded
    old: bool = False  # ... because an older version wrote it
    # (generation, writer) -> piece index -> (key, value)
    pieces: dict[tuple[int, str], dict[int, tuple[bytes, bytes]]] = field(default_factory=dict)
    generation: int = 0


def read_checkpoints(
    reader: Consumer,
    *,
    topic: str,
    results_topic: str,
    partitions: int,
    wanted: dict[int, Bounds],
    max_age_ms: int,
    log_id: tuple[str, str] | None,
) -> dict[int, Found]:
    """Each wanted results partition's checkpoint, read from the checkpoints `topic`; only
    one naming the log `log_id` (cluster ID, topic ID; None: unknown) can be used."""
    scans = {partition: _Scan() for partition in wanted}
    try:
        count = len(reader.list_topics(topic, timeout=10.0).topics[topic].partitions)
        for source in sorted({partition % count for partition in wanted}):
            _scan(reader, topic, source, results_topic, scans)
    except (KafkaException, KeyError, TimeoutError) as exc:
        reason = Unusable("unreadable", f"cannot read {topic}: {exc}")
        return {partition: Found(reason) for partition in wanted}
    now_ms = int(time.time() * 1000)
    oldest_ms = now_ms - max_age_ms
    return {
        partition: _found(scans[partition], (results_topic, partitions, log_id), bounds, oldest_ms)
        for partition, bounds in wanted.items()
    }


def _scan(
    reader: Consumer, topic: str, source: int, results_topic: str, scans: dict[int, _Scan]
) -> None:
    """Read one checkpoints partition from its beginning to its end, keeping what we need."""
    low, high = reader.get_watermark_offsets(TopicPartition(topic, source), timeout=10.0)
    if high <= low:
        return
    reader.assign([TopicPartition(topic, source, OFFSET_BEGINNING)])
    headers = {header_key(results_topic, p): p for p in scans}
    deadline = time.monotonic() + _READ_TIMEOUT_S
    last = -1
    try:
        while last < high - 1:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}[{source}] not read to offset {high} in time")
            for message in arrived(reader, 1000, 0.2):
                if message.error() is not None:
                    raise KafkaException(message.error())
                last = max(last, message.offset() or 0)
                _take(message.key() or b"", message.value(), results_topic, headers, scans)
    finally:
        reader.unassign()


def _take(
    key: bytes,
    value: bytes | None,
    results_topic: str,
    headers: dict[bytes, int],
    scans: dict[int, _Scan],
) -> None:
    """Fold one checkpoints record into the scans (later records replace earlier ones)."""
    partition = headers.get(key)
    if partition is not None:
        scan = scans[partition]
        scan.header, scan.corrupt, scan.old = None, None, False
        if value is not None:
            try:
                found = decode(value)
                if not isinstance(found, Header):
                    raise CheckpointError("a piece under a header key")
                if not 0 <= found.id.generation <= MAX_GENERATION:
                    raise CheckpointError(f"generation {found.id.generation} is out of range")
                scan.header = found
            except CheckpointError as exc:
                scan.corrupt, scan.old = str(exc), isinstance(exc, OldCheckpointError)
        return
    parsed = parse_piece_key(key)
    if parsed is None or parsed[0] != results_topic or parsed[1] not in scans:
        return
    _, partition, generation, writer, index = parsed
    scan = scans[partition]
    scan.generation = max(scan.generation, generation)
    pieces = scan.pieces.setdefault((generation, writer), {})
    if value is None:
        pieces.pop(index, None)
    else:
        pieces[index] = (key, value)


def _found(scan: _Scan, log: _Log, bounds: Bounds, oldest_ms: int) -> Found:
    header = scan.header
    chosen = (header.id.generation, header.id.writer) if header is not None else None
    stale = [
        key
        for generation_of, pieces in scan.pieces.items()
        if generation_of != chosen
        for key, _ in pieces.values()
    ]
    generation = max(scan.generation, header.id.generation if header is not None else 0)
    try:
        outcome: Restored | Unusable = _restore(scan, log, bounds)
    except CheckpointError as exc:
        outcome = Unusable("corrupt", str(exc))
    if isinstance(outcome, Restored) and header is not None and header.written_at_ms < oldest_ms:
        outcome = Unusable(
            "stale",
            "written longer ago than the results topic's delete.retention.ms: "
            "tombstones after it may be gone",
        )
    return Found(outcome, generation, stale)


def _restore(scan: _Scan, log: _Log, bounds: Bounds) -> Restored | Unusable:
    """The folds of the scan's newest header, or why it cannot be used."""
    results_topic, partitions, log_id = log
    header = scan.header
    if header is None:
        if scan.old:
            return Unusable("old_version", f"its header was {scan.corrupt}")
        if scan.corrupt is not None:
            return Unusable("corrupt", f"its header does not decode ({scan.corrupt})")
        return Unusable("missing", "none was written")
    checkpoint = header.id
    if checkpoint.results_topic != results_topic or checkpoint.partitions != partitions:
        return Unusable(
            "foreign",
            f"written for {checkpoint.results_topic} with {checkpoint.partitions} partitions",
        )
    unusable = _other_log(checkpoint.cluster_id, checkpoint.topic_id, log_id)
    if unusable is not None:
        return unusable
    low, high = bounds
    if high is None or checkpoint.next_offset > high:
        return Unusable(
            "beyond_end", f"it covers offsets up to {checkpoint.next_offset}, past the end {high}"
        )
    if checkpoint.next_offset < low:
        return Unusable(
            "truncated", f"it covers offsets up to {checkpoint.next_offset}, below the start {low}"
        )
    raw = scan.pieces.get((checkpoint.generation, checkpoint.writer), {})
    missing = [index for index in range(header.pieces) if index not in raw]
    if missing:
        return Unusable("incomplete", f"{len(missing)} of its {header.pieces} pieces are missing")
    pieces = [decode(raw[index][1]) for index in range(header.pieces)]
    for index, piece in enumerate(pieces):
        if not isinstance(piece, Piece) or piece.id != checkpoint or piece.index != index:
            raise CheckpointError(f"piece {index} belongs to another checkpoint")
    rows = restore_rows([piece for piece in pieces if isinstance(piece, Piece)])
    if len(rows) != header.runs:
        raise CheckpointError(f"{len(rows)} runs where the header says {header.runs}")
    return Restored(checkpoint.next_offset, rows, header.contributions)


def _other_log(cluster_id: str, topic_id: str, log_id: tuple[str, str] | None) -> Unusable | None:
    """Why a checkpoint naming (cluster_id, topic_id) is not provably of the log `log_id`."""
    if log_id is None or not cluster_id or not topic_id:
        return Unusable("foreign_topic", "it or this log does not name its cluster and topic ID")
    if cluster_id != log_id[0]:
        return Unusable("foreign_cluster", f"written from cluster {cluster_id!r}")
    if topic_id != log_id[1]:
        return Unusable("foreign_topic", f"written for topic ID {topic_id}, a topic deleted since")
    return None
