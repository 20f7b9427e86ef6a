"""Resume: read one run key's latest records from its partition of the compacted results topic."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from consumers._clients import client_config as with_logger
from consumers._decode import decode_value
from consumers.errors import ConsumerError
from schemas import (
    Codec,
    DecodeError,
    RunKey,
    SampleResult,
    decode_key,
    partition_for,
    run_key_prefix,
)

__all__ = ["ResumeState", "read_run_records", "resume_state"]

log = logging.getLogger(__name__)
_BATCH = 10_000
_POLL_S = 0.1


@dataclass(frozen=True)
class ResumeState:
    """What a worker may skip and what seeds its accumulator."""

    seeds: tuple[SampleResult, ...] = ()
    degraded: tuple[SampleResult, ...] = ()
    out_of_range: int = 0
    undecodable: int = 0
    skip_list: frozenset[tuple[int, int]] = field(default_factory=frozenset)

    @classmethod
    def of(cls, records: list[SampleResult], epochs: int, undecodable: int = 0) -> ResumeState:
        """Sort a run key's latest records into seeds, degraded ones and ignored ones."""
        in_range = [r for r in records if 0 <= r.epoch < epochs]
        seeds = tuple(r for r in in_range if not r.degraded)
        return cls(
            seeds=seeds,
            degraded=tuple(r for r in in_range if r.degraded),
            out_of_range=len(records) - len(in_range),
            undecodable=undecodable,
            skip_list=frozenset((r.sample_index, r.epoch) for r in seeds),
        )


def read_run_records(
    client_config: Mapping[str, Any],
    topic: str,
    run_key: RunKey,
    codec: Codec,
    *,
    timeout_s: float = 30.0,
) -> tuple[list[SampleResult], int]:
    """The latest record of every key of `run_key`, and how many latest values were undecodable.

    Reads the run key's one partition from the beginning up to the high watermark taken when
    it starts. Values of other run keys are never decoded: keys are filtered by byte prefix
    and only the latest value per key is decoded at the end.
    """
    consumer = _consumer(client_config)
    try:
        partition = _partition(consumer, topic, run_key, timeout_s)
        latest = _latest_values(consumer, topic, partition, run_key_prefix(run_key), timeout_s)
    except KafkaException as exc:
        raise ConsumerError(f"cannot read {topic} for {run_key}: {exc.args[0]}") from exc
    finally:
        consumer.close()
    records: list[SampleResult] = []
    undecodable = 0
    for raw_key, (offset, value) in latest.items():
        try:
            key = decode_key(raw_key)
            records.append(
                decode_value(codec, key, value, topic=topic, partition=partition, offset=offset)
            )
        except DecodeError as exc:
            undecodable += 1
            log.warning("resume ignores an undecodable record: %s", exc)
    return records, undecodable


def resume_state(
    client_config: Mapping[str, Any],
    topic: str,
    run_key: RunKey,
    codec: Codec,
    epochs: int,
    *,
    timeout_s: float = 30.0,
) -> ResumeState:
    """Read the run key's records and sort them into a ResumeState."""
    records, undecodable = read_run_records(
        client_config, topic, run_key, codec, timeout_s=timeout_s
    )
    return ResumeState.of(records, epochs, undecodable)


def _consumer(client_config: Mapping[str, Any]) -> Consumer:
    overrides = {
        # assign() needs no group, but librdkafka insists on a group.id; never committed.
        "group.id": f"resultlog-resume-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        # The end of the partition is only seen from an empty fetch, which the broker holds
        # back for fetch.wait.max.ms (500 ms by default): resume should not idle that long.
        "fetch.wait.max.ms": 50,
        "fetch.max.bytes": 64 * 1024 * 1024,
        "max.partition.fetch.bytes": 16 * 1024 * 1024,
    }
    return Consumer(with_logger(client_config, **overrides))


def _partition(consumer: Consumer, topic: str, run_key: RunKey, timeout_s: float) -> int:
    metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
    if metadata is None or metadata.error is not None or not metadata.partitions:
        raise ConsumerError(f"topic {topic} does not exist; run `resultlog topics create`")
    return partition_for(run_key, len(metadata.partitions))


def _latest_values(
    consumer: Consumer, topic: str, partition: int, prefix: bytes, timeout_s: float
) -> dict[bytes, tuple[int, bytes]]:
    low, high = consumer.get_watermark_offsets(
        TopicPartition(topic, partition), timeout=timeout_s, cached=False
    )
    latest: dict[bytes, tuple[int, bytes]] = {}
    if high <= low:
        return latest
    consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
    deadline = time.monotonic() + timeout_s
    while True:
        # consume() waits until the batch is full or the timeout passes: keep the wait short.
        batch = consumer.consume(num_messages=_BATCH, timeout=_POLL_S)
        if batch:
            deadline = time.monotonic() + timeout_s
        elif time.monotonic() > deadline:
            raise ConsumerError(f"no data from {topic}[{partition}] within {timeout_s:.0f}s")
        for message in batch:
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return latest
                raise KafkaException(error)
            key = message.key()
            offset = message.offset() or 0
            if key is not None and key.startswith(prefix):
                value = message.value()
                if value is None:  # a tombstone deletes the key
                    latest.pop(key, None)
                else:
                    latest[key] = (offset, value)
            if offset >= high - 1:
                return latest
