"""Classify results-topic messages: a record, a deletion, or poison (aggregator and replay).

The common message, a v2 or v3 record of a run key met before, is decided in one pass: the
key's run key part is looked up without decoding it again (the run key, its partition and its
values' leading bytes are remembered per key prefix), its value must start with those bytes
(framing, format version and the run key's three parts, exactly as the key names them), its
fold prefix is read by hand and checked, and the key must end with the prefix's indexes as
`encode_key` writes them. Anything else takes the full path (`decode_key`,
`decode_contribution`), which accepts the same records and says why it refuses the others.
Resume reads a run's fold views through the same pass (`Ingestor.read`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from confluent_kafka import KafkaError, Message

from resultlog.consumers._decode import decode_contribution
from resultlog.consumers.dlq import MISROUTED, reason_kind
from resultlog.consumers.fold import Contribution
from resultlog.schemas import (
    Codec,
    ConfigurationError,
    DecodeError,
    Location,
    RecordId,
    RegistryError,
    RunKey,
    decode_key,
    indexes_part,
    partition_for,
    run_key_prefix,
)
from resultlog.schemas._prefix import FoldPrefix, read_rest

__all__ = ["Batch", "Ingested", "Ingestor", "Poison", "stretches"]

_RUNS_HELD: Final = 4096
_FORMAT_VERSION_1: Final = b"\x02"  # the zig-zag varint of format_version 1


@dataclass(frozen=True, slots=True)
class Poison:
    """Why a message cannot be used, as a metric label and a human reason."""

    kind: str
    reason: str


class Ingested:
    """One consumed message, decided: which key it changes and how, and whether it is poison.

    A class of its own, not a NamedTuple: compiled, one is made at a small fraction of the
    cost, and the common record needs no RecordId (`record_id` builds one when asked)."""

    __slots__ = (
        "contribution",
        "epoch",
        "key",
        "offset",
        "partition",
        "poison",
        "run_key",
        "sample_index",
        "value",
    )

    def __init__(  # noqa: PLR0917 - a record's fields, in the order a reader meets them
        self,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        run_key: RunKey | None,  # None: the message changes no run (bad or misrouted key)
        sample_index: int,
        epoch: int,
        contribution: Contribution | None,  # None with a run key: delete the key
        poison: Poison | None,
    ) -> None:
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        self.run_key = run_key
        self.sample_index = sample_index
        self.epoch = epoch
        self.contribution = contribution
        self.poison = poison

    @property
    def record_id(self) -> RecordId | None:
        """The key the message changes (None: it changes no run)."""
        run_key = self.run_key
        return None if run_key is None else RecordId(run_key, self.sample_index, self.epoch)


def _unkeyed(
    partition: int, offset: int, key: bytes | None, value: bytes | None, poison: Poison
) -> Ingested:
    """A message that changes no run."""
    return Ingested(partition, offset, key, value, None, 0, 0, None, poison)


def _keyed(  # noqa: PLR0917 - Ingested's fields with a record id
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    record_id: RecordId,
    contribution: Contribution | None,
    poison: Poison | None,
) -> Ingested:
    """A message of a run's key."""
    run_key, sample_index, epoch = record_id
    return Ingested(
        partition, offset, key, value, run_key, sample_index, epoch, contribution, poison
    )


class Batch:
    """A consumed batch, decided: its records in order, the ends of partitions reached,
    the consumer's errors, and per partition the first offset the registry kept from us."""

    __slots__ = ("decoded", "ends", "errors", "registry_error", "unread")

    def __init__(self) -> None:
        self.decoded: list[Ingested] = []
        self.ends: list[tuple[int, int]] = []
        self.errors: list[KafkaError] = []
        self.unread: dict[int, int] = {}
        self.registry_error: RegistryError | None = None


def stretches(items: list[Ingested]) -> list[tuple[Ingested, list[tuple[int, Contribution]]]]:
    """Items as stretches of consecutive records of one run key in one partition, each its
    first item and every (offset, contribution); any other item alone, with no pairs."""
    out: list[tuple[Ingested, list[tuple[int, Contribution]]]] = []
    group: list[tuple[int, Contribution]] = []
    first: Ingested | None = None
    for item in items:
        run_key, contribution = item.run_key, item.contribution
        if first is not None and (
            contribution is None
            or run_key is None
            or item.partition != first.partition
            # the Ingestor hands out one RunKey object per run key: identity, mostly
            or (run_key is not first.run_key and run_key != first.run_key)
        ):
            out.append((first, group))
            first, group = None, []
        if contribution is None or run_key is None:
            out.append((item, []))
        else:
            if first is None:
                first = item
            group.append((item.offset, contribution))
    if first is not None:
        out.append((first, group))
    return out


class _KnownRun:
    """A run key met before: its partition, and how its values written by hand-read schemas
    start (single-object header, format version 1, run_id, benchmark_id, model)."""

    def __init__(self, run_key: RunKey, partition: int, headers: dict[bytes, bool]) -> None:
        self.run_key = run_key
        self.partition = partition
        self.parts = (run_key.run_id, run_key.benchmark_id, run_key.model)
        self.prefix = run_key_prefix(run_key)  # how its keys start (ending in `/`)
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
        self._last: _KnownRun | None = None

    def ingest_batch(self, batch: list[Message], skipped: set[int]) -> Batch:
        """Decide a consumed batch in order, leaving out the partitions in `skipped`, and in a
        partition the registry kept a record from, that record and every one after it."""
        out = Batch()
        unread = out.unread
        for message in batch:
            partition = message.partition() or 0
            if partition in skipped:
                continue
            error = message.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    out.errors.append(error)
                elif partition not in unread:
                    out.ends.append((partition, message.offset() or 0))
            elif partition not in unread:
                try:
                    out.decoded.append(self.ingest(message))
                except RegistryError as exc:
                    unread[partition] = message.offset() or 0
                    out.registry_error = exc
        return out

    def ingest(self, message: Message) -> Ingested:
        """Decode a message's key, then the fold fields of its value, as replay and resume do."""
        partition, offset = message.partition() or 0, message.offset() or 0
        key, value = message.key(), message.value()
        if type(key) is bytes and type(value) is bytes:
            decided = self._fast(key, value, partition, offset)
            if decided is not None:
                return decided
        return self._full(message, partition, offset, key, value)

    def _fast(self, key: bytes, value: bytes, partition: int, offset: int) -> Ingested | None:
        """The message decided in one pass, if it is the common case (None: take the full path)."""
        known = self._known(key, partition)
        if known is None or not self._read(known, key, value):
            return None
        prefix = self._prefix
        contribution = Contribution.of_prefix(prefix)
        return Ingested(
            partition, offset, key, value, known.run_key, prefix.sample_index, prefix.epoch,
            contribution, None,
        )  # fmt: skip

    def read(self, key: bytes, value: bytes, partition: int) -> FoldPrefix | None:
        """The checked fold prefix of a common message (a record of a run key met before or
        expected, in its partition), read in one pass; None: the full path decides. The
        prefix is read into again by the next call: take what it holds first."""
        known = self._known(key, partition)
        if known is None or not self._read(known, key, value):
            return None
        return self._prefix

    def _known(self, key: bytes, partition: int) -> _KnownRun | None:
        """The known run of a key's run key part, if met in this partition (the last one
        looked first: a partition's records of one run mostly follow each other). Run key
        parts hold no `/`, so a key starting with a run's prefix has its run key part."""
        known = self._last
        if known is None or not key.startswith(known.prefix):
            middle = key.rfind(b"/", 0, key.rfind(b"/"))
            found = self._runs.get(key[:middle]) if middle > 0 else None
            if found is None:
                return None
            known = self._last = found
        return known if known.partition == partition else None

    def _read(self, known: _KnownRun, key: bytes, value: bytes) -> bool:
        """Read the value's fold prefix into the scratch prefix: whether it is the common
        record of `key` (known's leading bytes, acceptable, the key's indexes)."""
        for lead, v3 in known.leads:
            if value.startswith(lead):
                prefix = self._prefix
                prefix.format_version = 1
                prefix.run_id, prefix.benchmark_id, prefix.model = known.parts
                if not (read_rest(prefix, value, len(lead), v3) and prefix.acceptable()):
                    return False
                return key[len(known.prefix) :] == indexes_part(prefix.sample_index, prefix.epoch)
        return False

    def _full(
        self, message: Message, partition: int, offset: int, key: bytes | None, value: bytes | None
    ) -> Ingested:
        """The message decided by `decode_key` and `decode_contribution`, every check made."""
        try:
            record_id = decode_key(key if key is not None else b"")
        except DecodeError as exc:
            error = exc.at(Location(message.topic() or "", partition, offset))
            return _unkeyed(partition, offset, key, value, Poison(reason_kind(error), str(error)))
        expected = partition_for(record_id.run_key, self.num_partitions)
        if expected != partition:
            # Resume and replay of one run read a run key's one partition: a stray copy is unseen.
            reason = (
                f"record of {record_id.run_key} is in partition {partition}, expected {expected}"
            )
            return _unkeyed(partition, offset, key, value, Poison(MISROUTED, reason))
        self.expect(record_id.run_key, expected)
        if value is None:
            return _keyed(partition, offset, key, value, record_id, None, None)
        try:
            at = Location(message.topic() or "", partition, offset)
            contribution = decode_contribution(self.codec, record_id, value, at)
        except ConfigurationError:
            raise  # a misconfigured reader stops: good records are never dead-lettered for it
        except DecodeError as exc:
            # The latest value of this key is unusable: the key has no record, as in replay.
            poison = Poison(reason_kind(exc), str(exc))
            return _keyed(partition, offset, key, value, record_id, None, poison)
        return _keyed(partition, offset, key, value, record_id, contribution, None)

    def expect(self, run_key: RunKey, partition: int) -> None:
        """Take `run_key`'s records in `partition` in one pass from now on (a run key that
        decoded in full, or the one run a reader reads)."""
        prefix = run_key_prefix(run_key)[:-1]
        if prefix not in self._runs:
            if len(self._runs) >= _RUNS_HELD:
                self._runs.clear()
            self._runs[prefix] = _KnownRun(run_key, partition, self._headers)
