"""Replay: recompute run summaries from the results topic alone.

Rule shared with resume and the aggregator: the latest record of a key wins. A latest record
that cannot be decoded leaves its key without a record (as compaction eventually would), and
is counted, never fatal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from confluent_kafka import KafkaException, Message

from resultlog.consumers._ingest import ingest
from resultlog.consumers._scan import scan
from resultlog.consumers.errors import ConsumerError
from resultlog.consumers.fold import RunFold, fold
from resultlog.consumers.resume import read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.schemas import AsOf, Codec, RunKey, RunSummary

__all__ = ["ReplayResult", "replay_all", "replay_run"]

log = logging.getLogger(__name__)


@dataclass
class ReplayResult:
    """Summaries recomputed from the topic, and what could not be read."""

    summaries: dict[RunKey, RunSummary] = field(default_factory=dict)
    records: int = 0
    undecodable: int = 0
    reasons: dict[str, int] = field(default_factory=dict)

    def count_bad(self, kind: str) -> None:
        """Count one undecodable record by its kind (one of consumers.dlq.REASON_KINDS)."""
        self.undecodable += 1
        self.reasons[kind] = self.reasons.get(kind, 0) + 1


def replay_run(kafka: KafkaConnection, run_key: RunKey) -> ReplayResult:
    """Recompute one run key's summary from its partition."""
    records, undecodable, reasons = read_run_records(kafka, run_key)
    as_of = AsOf(computed_at=datetime.now(UTC), source="replay")
    result = ReplayResult(records=len(records), undecodable=undecodable, reasons=dict(reasons))
    result.summaries[run_key] = fold(records, run_key, as_of)
    return result


def replay_all(
    kafka: KafkaConnection,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    timeout_s: float = 30.0,
) -> ReplayResult:
    """Recompute every run key's summary from every partition, up to the current end."""
    topic, codec = kafka.results_topic, kafka.codec
    consumer = kafka.reader()
    folds: dict[RunKey, RunFold] = {}
    result = ReplayResult()
    try:
        count = kafka.partition_count(topic, consumer, timeout_s=timeout_s)
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
    item = ingest(message, codec, partitions)  # the aggregator's rule, message for message
    if item.poison is not None:
        result.count_bad(item.poison.kind)
    if item.record_id is None:
        return
    record_id = item.record_id
    folded = folds.setdefault(record_id.run_key, RunFold(record_id.run_key))
    if item.record is None:  # a tombstone, or an undecodable latest value: the key is gone
        folded.remove(record_id.sample_index, record_id.epoch)
    else:
        folded.apply(item.record)
