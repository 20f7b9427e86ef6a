"""Classify results-topic messages: a record, a deletion, or poison (aggregator and replay).

The common message, a v2 or v3 record of a run key met before, is decided in one pass: its key
is split from the end without decoding the run key again (the run key, its partition and its
values' leading bytes are remembered per key prefix), its value must start with those bytes
(framing, format version and the run key's three parts, exactly as the key names them), and
its fold prefix is read by hand and checked. Anything else takes the full path (`decode_key`,
`decode_contribution`), which accepts the same records and says why it refuses the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple

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
    RunKey,
    decode_key,
    partition_for,
    run_key_prefix,
)
from resultlog.schemas._prefix import FoldPrefix, read_rest

__all__ = ["Ingested", "Ingestor", "Poison", "ingest"]

_SLASH: Final = 0x2F
_ZERO: Final = 0x30
_NINE: Final = 0x39
_MAX_DIGITS: Final = 18  # a canonical index below 10**18 fits a long (decode_key's fast rule)
_RUNS_HELD: Final = 4096
_FORMAT_VERSION_1: Final = b"\x02"  # the zig-zag varint of format_version 1


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


class _KnownRun:
    """A run key met before: its partition, and how its values written by hand-read schemas
    start (single-object header, format version 1, run_id, benchmark_id, model)."""

    def __init__(self, run_key: RunKey, partition: int, headers: dict[bytes, bool]) -> None:
        self.run_key = run_key
        self.partition = partition
        self.parts = (run_key.run_id, run_key.benchmark_id, run_key.model)
        identity = _FORMAT_VERSION_1 + b"".join(map(_avro_string, self.parts))
        self.leads = [(header + identity, v3) for header, v3 in headers.items()]


def _avro_string(text: str) -> bytes:
    """An Avro string: its UTF-8 length as a zig-zag varint, then its bytes."""
    raw = text.encode()
    size, varint = len(raw) << 1, bytearray()
    while size >= 0x80:
        varint.append(size & 0x7F | 0x80)
        size >>= 7
    varint.append(size)
    return bytes(varint) + raw


class Ingestor:
    """Decides the messages of one results topic read with one codec and partition count
    (one thread at a time: it reads every value into the same scratch prefix)."""

    def __init__(self, codec: Codec, num_partitions: int) -> None:
        self.codec = codec
        self.num_partitions = num_partitions
        self._headers = dict(codec.hand_read_headers)
        self._runs: dict[bytes, _KnownRun] = {}
        self._prefix = FoldPrefix()  # read into again and again: nothing holds it

    def ingest(self, message: Message) -> Ingested:
        """Decode a message's key, then the fold fields of its value, as replay and resume do."""
        partition, offset = message.partition() or 0, message.offset() or 0
        key, value = message.key(), message.value()
        if type(key) is bytes and type(value) is bytes:
            decided = self._fast(key, value, partition, offset)
            if decided is not None:
                return decided
        return self._full(message, partition, offset, key, value)

    def ingest_all(self, messages: list[Message]) -> list[Ingested]:
        """`ingest` of each message, in order."""
        return [self.ingest(message) for message in messages]

    def _fast(self, key: bytes, value: bytes, partition: int, offset: int) -> Ingested | None:
        """The message decided in one pass, if it is the common case (None: take the full path)."""
        end = len(key)
        epoch, middle = _index_before(key, end)
        sample_index, middle = _index_before(key, middle)
        if middle <= 0:
            return None
        known = self._runs.get(key[:middle])
        if known is None or known.partition != partition:
            return None
        for lead, v3 in known.leads:
            if value.startswith(lead):
                prefix = self._prefix
                prefix.format_version = 1
                prefix.run_id, prefix.benchmark_id, prefix.model = known.parts
                if (
                    not read_rest(prefix, value, len(lead), v3)
                    or prefix.sample_index != sample_index
                    or prefix.epoch != epoch
                    or not prefix.acceptable()
                ):
                    return None
                record_id = RecordId(known.run_key, sample_index, epoch)
                contribution = Contribution.of_prefix(prefix)
                return Ingested(partition, offset, key, value, record_id, contribution, None)
        return None

    def _full(
        self, message: Message, partition: int, offset: int, key: bytes | None, value: bytes | None
    ) -> Ingested:
        """The message decided by `decode_key` and `decode_contribution`, every check made."""
        try:
            record_id = decode_key(key if key is not None else b"")
        except DecodeError as exc:
            error = exc.at(Location(message.topic() or "", partition, offset))
            poison = Poison(reason_kind(error), str(error))
            return Ingested(partition, offset, key, value, None, None, poison)
        expected = partition_for(record_id.run_key, self.num_partitions)
        if expected != partition:
            # Resume and replay of one run read a run key's one partition: a stray copy is unseen.
            reason = (
                f"record of {record_id.run_key} is in partition {partition}, expected {expected}"
            )
            return Ingested(partition, offset, key, value, None, None, Poison(MISROUTED, reason))
        self._remember(record_id.run_key, expected)
        if value is None:
            return Ingested(partition, offset, key, value, record_id, None, None)
        try:
            at = Location(message.topic() or "", partition, offset)
            contribution = decode_contribution(self.codec, record_id, value, at)
        except ConfigurationError:
            raise  # a misconfigured reader stops: good records are never dead-lettered for it
        except DecodeError as exc:
            # The latest value of this key is unusable: the key has no record, as in replay.
            poison = Poison(reason_kind(exc), str(exc))
            return Ingested(partition, offset, key, value, record_id, None, poison)
        return Ingested(partition, offset, key, value, record_id, contribution, None)

    def _remember(self, run_key: RunKey, partition: int) -> None:
        """Keep a run key that decoded in full, for the one-pass path of its next records."""
        prefix = run_key_prefix(run_key)[:-1]
        if prefix not in self._runs:
            if len(self._runs) >= _RUNS_HELD:
                self._runs.clear()
            self._runs[prefix] = _KnownRun(run_key, partition, self._headers)


def _index_before(key: bytes, end: int) -> tuple[int, int]:
    """The canonical decimal index ending at `end` (after a `/`), and where its `/` is;
    (0, -1) when there is none (then the key takes the full path)."""
    value, start = 0, end
    while start > 0 and _ZERO <= key[start - 1] <= _NINE:
        start -= 1
    digits = end - start
    if digits == 0 or digits > _MAX_DIGITS or start == 0 or key[start - 1] != _SLASH:
        return 0, -1
    if digits > 1 and key[start] == _ZERO:
        return 0, -1  # a leading zero: not canonical
    for index in range(start, end):
        value = value * 10 + key[index] - _ZERO
    return value, start - 1


def ingest(message: Message, codec: Codec, num_partitions: int) -> Ingested:
    """Decode one message's key, then the fold fields of its value (see Ingestor)."""
    return Ingestor(codec, num_partitions).ingest(message)
