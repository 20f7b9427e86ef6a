"""Key histories: every record the log holds for some (sample, epoch) keys of a run key.

Latest-wins is what resume, replay and the aggregator read; a writer about to write degraded
records also needs to know whether a completed record of the key lies underneath (written by
another writer, possibly shadowed by a degraded one), and its exact bytes to write it again.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from confluent_kafka import KafkaException

from resultlog.consumers._decode import decode_value
from resultlog.consumers._run_read import read_run
from resultlog.consumers.errors import ConsumerError
from resultlog.kafka import KafkaConnection
from resultlog.schemas import (
    DecodeError,
    Location,
    RunKey,
    SampleResult,
    decode_key,
    encode_key,
)

__all__ = ["KeyHistory", "read_key_histories"]

_Pair = tuple[int, int]


@dataclass(frozen=True)
class KeyHistory:
    """One key's records since it was last deleted: the latest, and the last completed one.

    `latest` is None when the key has no record or its latest value is undecodable;
    `completed_value` is the completed record's value exactly as the log holds it.
    """

    latest: SampleResult | None = None
    completed: SampleResult | None = None
    completed_value: bytes | None = None

    @property
    def settled(self) -> bool:
        """The latest record is a completed one."""
        return self.latest is not None and not self.latest.degraded

    @property
    def shadowed(self) -> bool:
        """A completed record lies under a later degraded (or undecodable) one."""
        return self.completed is not None and not self.settled


def read_key_histories(
    kafka: KafkaConnection, run_key: RunKey, pairs: Collection[_Pair], *, timeout_s: float = 30.0
) -> dict[_Pair, KeyHistory]:
    """The history of each (sample_index, epoch) of the run key, read up to the current end.

    Only the values of the asked keys are decoded, newest first, until a completed one.
    """
    wanted = {encode_key(run_key, index, epoch) for index, epoch in pairs}
    topic = kafka.results_topic
    values: dict[bytes, list[tuple[int, bytes]]] = {key: [] for key in wanted}
    try:
        with read_run(kafka, run_key, timeout_s) as found:
            partition = found.partition
            for message in found.messages:
                key = message.key()
                if key not in wanted:
                    continue
                value = message.value()
                if value is None:  # deleted: what came before no longer counts
                    values[key].clear()
                else:
                    values[key].append((message.offset() or 0, value))
    except KafkaException as exc:
        raise ConsumerError(f"cannot read {topic} for {run_key}: {exc.args[0]}") from exc
    codec = kafka.codec
    histories = {}
    for key, versions in values.items():
        record_id = decode_key(key)
        pair = (record_id.sample_index, record_id.epoch)
        latest: SampleResult | None = None
        completed: tuple[SampleResult, bytes] | None = None
        for position, (offset, value) in enumerate(reversed(versions)):
            try:
                record = decode_value(codec, record_id, value, Location(topic, partition, offset))
            except DecodeError:
                continue
            latest = record if position == 0 else latest
            if not record.degraded:
                completed = record, value
                break
        histories[pair] = KeyHistory(latest, *(completed or (None, None)))
    return histories
