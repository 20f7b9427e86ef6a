"""Replay: recompute run summaries from the results topic alone.

Rule shared with resume and the aggregator: the latest record of a key wins. A latest record
that cannot be decoded leaves its key without a record (as compaction eventually would), and
is counted, never fatal.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from consumers._clients import client_config as with_logger
from consumers._decode import decode_value
from consumers.errors import ConsumerError
from consumers.fold import RunFold, fold
from consumers.resume import read_run_records
from schemas import AsOf, Codec, DecodeError, RunKey, RunSummary, decode_key

__all__ = ["ReplayResult", "replay_all", "replay_run"]

log = logging.getLogger(__name__)
_BATCH = 10_000
_POLL_S = 0.1


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
    consumer = Consumer(with_logger(client_config, **_reader_config()))
    folds: dict[RunKey, RunFold] = {}
    result = ReplayResult()
    try:
        ends = _high_watermarks(consumer, topic, timeout_s)
        total = sum(high - low for low, high in ends.values())
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends if ends[p][1]])
        for message in _messages(consumer, ends, timeout_s):
            _apply(message, codec, folds, result)
            if on_progress is not None and result.records % 10_000 == 0:
                on_progress(result.records, total)
    except KafkaException as exc:
        raise ConsumerError(f"cannot replay {topic}: {exc.args[0]}") from exc
    finally:
        consumer.close()
    offsets = {str(p): high for p, (_, high) in ends.items()}
    as_of = AsOf(computed_at=datetime.now(UTC), source="replay", offsets=offsets)
    result.summaries = {
        key: folded.summary(as_of) for key, folded in sorted(folds.items()) if len(folded)
    }
    return result


def _reader_config() -> dict[str, Any]:
    return {
        # assign() needs no group, but librdkafka insists on a group.id; never committed.
        "group.id": f"resultlog-replay-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 16 * 1024 * 1024,
    }


def _high_watermarks(
    consumer: Consumer, topic: str, timeout_s: float
) -> dict[int, tuple[int, int]]:
    metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise ConsumerError(f"topic {topic} does not exist; run `resultlog topics create`")
    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s, cached=False)
        for p in sorted(metadata.partitions)
    }


def _messages(
    consumer: Consumer, ends: dict[int, tuple[int, int]], timeout_s: float
) -> Iterator[Any]:
    """Every message below the high watermarks taken at the start."""
    remaining = {p for p, (low, high) in ends.items() if high > low}
    deadline = time.monotonic() + timeout_s
    while remaining:
        # consume() waits until the batch is full or the timeout passes: keep the wait short.
        batch = consumer.consume(num_messages=_BATCH, timeout=_POLL_S)
        if batch:
            deadline = time.monotonic() + timeout_s
        elif time.monotonic() > deadline:
            raise ConsumerError(f"replay got no data within {timeout_s:.0f}s")
        for message in batch:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaException(error)
            partition, offset = message.partition(), message.offset() or 0
            if partition not in remaining:
                continue
            if offset >= ends[partition][1] - 1:
                remaining.discard(partition)
            yield message


def _apply(message: Any, codec: Codec, folds: dict[RunKey, RunFold], result: ReplayResult) -> None:
    result.records += 1
    where = {"topic": message.topic(), "partition": message.partition(), "offset": message.offset()}
    try:
        run_key, sample_index, epoch = decode_key(message.key() or b"")
    except DecodeError as exc:
        result.count_bad(exc.at(where["topic"], where["partition"], where["offset"]))
        return
    folded = folds.setdefault(run_key, RunFold(run_key))
    value = message.value()
    if value is None:  # a tombstone deletes the key
        folded.remove(sample_index, epoch)
        return
    try:
        record = decode_value(codec, (run_key, sample_index, epoch), value, **where)
    except DecodeError as exc:
        result.count_bad(exc)
        folded.remove(sample_index, epoch)
        return
    folded.apply(record)
