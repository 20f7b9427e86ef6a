"""Classify one results-topic message: a record, a deletion, or poison (aggregator and replay)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from confluent_kafka import Message

from resultlog.consumers._decode import decode_contribution
from resultlog.consumers.dlq import MISROUTED, reason_kind
from resultlog.consumers.fold import Contribution
from resultlog.schemas import (
    Codec,
    ConfigurationError,
    DecodeError,
    Location,
    RecordId,
    decode_key,
    partition_for,
)

__all__ = ["Ingested", "Poison", "ingest"]


@dataclass(frozen=True, slots=True)
class Poison:
    """Why a message cannot be used, as a metric label and a human reason."""

    kind: str
    reason: str


class Ingested(NamedTuple):
    """One consumed message, decided: which key it changes and how, and whether it is poison."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    record_id: RecordId | None  # None: the message changes no run (bad or misrouted key)
    contribution: Contribution | None  # None with a record_id: delete the key
    poison: Poison | None


def ingest(message: Message, codec: Codec, num_partitions: int) -> Ingested:
    """Decode a message's key, then the fold fields of its value, the way replay and resume do."""
    partition, offset = message.partition() or 0, message.offset() or 0
    key, value = message.key(), message.value()
    try:
        record_id = decode_key(key if key is not None else b"")
    except DecodeError as exc:
        error = exc.at(Location(message.topic() or "", partition, offset))
        poison = Poison(reason_kind(error), str(error))
        return Ingested(partition, offset, key, value, None, None, poison)
    expected = partition_for(record_id.run_key, num_partitions)
    if expected != partition:
        # Resume and replay of one run read a run key's one partition: a stray copy is unseen.
        reason = f"record of {record_id.run_key} is in partition {partition}, expected {expected}"
        return Ingested(partition, offset, key, value, None, None, Poison(MISROUTED, reason))
    if value is None:
        return Ingested(partition, offset, key, value, record_id, None, None)
    try:
        at = Location(message.topic() or "", partition, offset)
        contribution = decode_contribution(codec, record_id, value, at)
    except ConfigurationError:
        raise  # a misconfigured reader stops: good records are never dead-lettered for it
    except DecodeError as exc:
        # The latest value of this key is unusable: the key has no record, as in replay.
        poison = Poison(reason_kind(exc), str(exc))
        return Ingested(partition, offset, key, value, record_id, None, poison)
    return Ingested(partition, offset, key, value, record_id, contribution, None)
