"""Replay: recompute run summaries from the results topic alone.

Rule shared with resume and the aggregator: the latest record of a key wins. A latest record
that cannot be decoded leaves its key without a record (as compaction eventually would), and
is counted, never fatal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import KafkaException, Message

from consumers._decode import decode_value
from consumers._scan import partition_count, reader, scan
from consumers.errors import ConsumerError
from consumers.fold import RunFold, fold
from consumers.resume import read_run_records
from schemas import AsOf, Codec, DecodeError, RunKey, RunSummary, decode_key, partition_for

__all__ = ["ReplayResult", "replay_all", "replay_run"]

log = logging.getLogger(__name__)


@dataclass
class ReplayResult:
    """Summaries recomputed from the topic, and what could not be read."""

    summaries: dict[RunKey, RunSummary] = field(default_factory=dict)
    records: int = 0
    undecodable: int = 0
    reasons: dict[str, int] = field(default_factory=dict)

    def count_bad(self, error: DecodeError) -> None:
        """Count one undecodable record by the kind of its error."""
        self.undecodable += 1
        kind = type(error).__name__
        self.reasons[kind] = self.reasons.get(kind, 0) + 1


def replay_run(
    client_config: Mapping[str, Any], topic: str, run_key: RunKey, codec: Codec
) -> ReplayResult:
    """Recompute one run key's summary from its partition."""
    records, undecodable = read_run_records(client_config, topic, run_key, codec)
    as_of = AsOf(computed_at=datetime.now(UTC), source="replay")
    result = ReplayResult(records=len(records), undecodable=undecodable)
    result.summaries[run_key] = fold(records, run_key, as_of)
    return result


def replay_all(
    client_config: Mapping[str, Any],
    topic: str,
    codec: Codec,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    timeout_s: float = 30.0,
) -> ReplayResult:
    """Recompute every run key's summary from every partition, up to the current end."""
    consumer = reader(client_config)
    folds: dict[RunKey, RunFold] = {}
    result = ReplayResult()
    try:
        count = partition_count(consumer, topic, timeout_s)
        ends, messages = scan(consumer, topic, range(count), timeout_s)
        total = sum(ends.values())
        for message in messages:
            _apply(message, codec, folds, result, count)
            if on_progress is not None and result.records % 10_000 == 0:
                on_progress(result.records, total)
    except KafkaException as exc:
        raise ConsumerError(f"cannot replay {topic}: {exc.args[0]}") from exc
    finally:
        consumer.close()
    offsets = {str(p): high for p, high in ends.items()}
    as_of = AsOf(computed_at=datetime.now(UTC), source="replay", offsets=offsets)
    result.summaries = {
        key: folded.summary(as_of) for key, folded in sorted(folds.items()) if len(folded)
    }
    return result


def _apply(
    message: Message,
    codec: Codec,
    folds: dict[RunKey, RunFold],
    result: ReplayResult,
    partitions: int,
) -> None:
    result.records += 1
    topic, partition, offset = message.topic() or "", message.partition() or 0, message.offset()
    offset = offset or 0
    try:
        run_key, sample_index, epoch = decode_key(message.key() or b"")
    except DecodeError as exc:
        result.count_bad(exc.at(topic, partition, offset))
        return
    if partition_for(run_key, partitions) != partition:
        # Resume, replay of one run and the aggregator never look here for this run key.
        reason = f"{run_key} belongs in partition {partition_for(run_key, partitions)}"
        result.count_bad(DecodeError(reason, message.value(), topic=topic, partition=partition))
        return
    folded = folds.setdefault(run_key, RunFold(run_key))
    value = message.value()
    if value is None:  # a tombstone deletes the key
        folded.remove(sample_index, epoch)
        return
    key = (run_key, sample_index, epoch)
    try:
        record = decode_value(codec, key, value, topic=topic, partition=partition, offset=offset)
    except DecodeError as exc:
        result.count_bad(exc)
        folded.remove(sample_index, epoch)
        return
    folded.apply(record)
