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

from resultlog.consumers._ingest import Ingested, Ingestor
from resultlog.consumers._scan import scan
from resultlog.consumers.errors import ConsumerError
from resultlog.consumers.fold import RunFold, fold_records
from resultlog.consumers.resume import read_run_views_to
from resultlog.consumers.summaries import SummaryPublisher, latest_summaries
from resultlog.kafka import KafkaConnection
from resultlog.schemas import AsOf, Codec, RunKey, RunSummary, partition_for

__all__ = ["PublishReport", "ReplayResult", "publish_replayed", "replay_all", "replay_run"]

log = logging.getLogger(__name__)


@dataclass
class ReplayResult:
    """Summaries recomputed from the topic, and what could not be read.

    `unreadable`: runs with a key whose latest value could not be decoded (their summaries
    miss it, so they are never published).
    """

    summaries: dict[RunKey, RunSummary] = field(default_factory=dict)
    records: int = 0
    undecodable: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    unreadable: set[RunKey] = field(default_factory=set)

    def count_bad(self, kind: str) -> None:
        """Count one undecodable record by its kind (one of consumers.dlq.REASON_KINDS)."""
        self.undecodable += 1
        self.reasons[kind] = self.reasons.get(kind, 0) + 1


def replay_run(kafka: KafkaConnection, run_key: RunKey) -> ReplayResult:
    """Recompute one run key's summary from its partition."""
    loaded, offsets = read_run_views_to(kafka, run_key)
    as_of = AsOf(computed_at=datetime.now(UTC), source="replay", offsets=offsets)
    undecodable, reasons = loaded.undecodable, dict(loaded.reasons)
    result = ReplayResult(records=len(loaded.records), undecodable=undecodable, reasons=reasons)
    result.summaries[run_key] = fold_records(loaded.records, run_key, as_of)
    if undecodable:
        result.unreadable.add(run_key)
    return result


def replay_all(
    kafka: KafkaConnection,
    *,
    on_progress: Callable[[int, int], None] | None = None,
    timeout_s: float = 30.0,
) -> ReplayResult:
    """Recompute every run key's summary from every partition, up to the current end."""
    topic = kafka.results_topic
    consumer = kafka.reader()
    try:
        count = kafka.partition_count(topic, consumer, timeout_s=timeout_s)
        replayer = _Replayer(kafka.codec, count)
        ends, messages = scan(consumer, topic, range(count), timeout_s)
        total = sum(ends.values())
        for message in messages:
            replayer.apply(message)
            if on_progress is not None and replayer.result.records % 10_000 == 0:
                on_progress(replayer.result.records, total)
    except KafkaException as exc:
        raise ConsumerError(f"cannot replay {topic}: {exc.args[0]}") from exc
    finally:
        consumer.close()
    offsets = {str(p): high for p, high in ends.items()}
    return replayer.finish(AsOf(computed_at=datetime.now(UTC), source="replay", offsets=offsets))


class _Replayer:
    """The folds of every run key met so far, and what could not be read."""

    def __init__(self, codec: Codec, partitions: int) -> None:
        self.ingestor = Ingestor(codec, partitions)
        self.result = ReplayResult()
        self.folds: dict[RunKey, RunFold] = {}
        self.bad: dict[RunKey, set[tuple[int, int]]] = {}  # keys whose latest is undecodable

    def apply(self, message: Message) -> None:
        """Fold one message in, by the aggregator's rule (`Ingestor`)."""
        self.result.records += 1
        item: Ingested = self.ingestor.ingest(message)
        if item.poison is not None:
            self.result.count_bad(item.poison.kind)
        run_key, sample_index, epoch = item.run_key, item.sample_index, item.epoch
        if run_key is None:
            return
        if item.poison is not None:
            self.bad.setdefault(run_key, set()).add((sample_index, epoch))
        elif self.bad:
            self.bad.get(run_key, set()).discard((sample_index, epoch))
        folded = self.folds.get(run_key)
        if folded is None:
            folded = self.folds[run_key] = RunFold(run_key)
        if item.contribution is None:  # a tombstone, or an undecodable latest value: gone
            folded.remove(sample_index, epoch)
        else:
            folded.apply(item.contribution)

    def finish(self, as_of: AsOf) -> ReplayResult:
        """The summaries of the runs that have records."""
        result = self.result
        result.summaries = {
            key: folded.summary(as_of) for key, folded in sorted(self.folds.items()) if len(folded)
        }
        result.unreadable = {run_key for run_key, keys in self.bad.items() if keys}
        return result


@dataclass(frozen=True)
class PublishReport:
    """What `publish_replayed` did: published, left alone, refused."""

    published: int
    as_fresh: int  # the topic already held a summary covering as much of the log
    empty: int  # runs without records: nothing to publish
    unreadable: tuple[RunKey, ...]  # runs with records that could not be read: refused

    def describe(self, topic: str) -> str:
        """One line for people."""
        return (
            f"published {self.published} summaries to {topic} ({self.as_fresh} already as "
            f"fresh there, {self.empty} without records, {len(self.unreadable)} refused)"
        )


def publish_replayed(
    kafka: KafkaConnection, result: ReplayResult, *, timeout_s: float = 30.0
) -> PublishReport:
    """Publish replayed summaries, never going backwards.

    A run without records is not published (its summary would be a phantom, or resurrect a
    purged run); nor is one with records that could not be read (its summary would miss
    them); nor one whose summary on the topic already covers as much of the log (offsets),
    so a replay that raced a live aggregator never overwrites its fresher summary. What a
    stale publication could still break, the aggregator corrects (consumers.aggregator).
    """
    count = kafka.settings.partitions  # checked against the topics by every client
    runs = {k: s for k, s in result.summaries.items() if k not in result.unreadable}
    with_records = {k: s for k, s in runs.items() if s.records}
    on_topic = latest_summaries(kafka, with_records, timeout_s=timeout_s)
    fresh = [
        summary
        for run_key, summary in with_records.items()
        if not _covers(on_topic.get(run_key), summary, str(partition_for(run_key, count)))
    ]
    published = SummaryPublisher(kafka).publish_all(fresh, timeout_s) if fresh else 0
    return PublishReport(
        published=published,
        as_fresh=len(with_records) - len(fresh),
        empty=len(runs) - len(with_records),
        unreadable=tuple(sorted(result.unreadable)),
    )


def _covers(current: RunSummary | None, replayed: RunSummary, partition: str) -> bool:
    """Whether `current` was computed from at least as much of the partition as `replayed`."""
    if current is None or current.as_of is None or replayed.as_of is None:
        return False
    seen, ours = current.as_of.offsets.get(partition), replayed.as_of.offsets.get(partition)
    return seen is not None and ours is not None and seen >= ours
