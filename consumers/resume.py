"""Resume: read one run key's latest records from its partition of the compacted results topic."""

from __future__ import annotations

import gc
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Generic, NamedTuple, TypeVar

from confluent_kafka import Consumer, KafkaException, TopicPartition

from resultlog.consumers._decode import decode_value, decode_view, view_of
from resultlog.consumers._index_check import UnusableIndexError
from resultlog.consumers._ingest import Ingestor
from resultlog.consumers._run_read import index_partition, read_run
from resultlog.consumers._scan import scan_ranges, watermark_offsets
from resultlog.consumers.dlq import reason_kind
from resultlog.consumers.errors import ConsumerError
from resultlog.consumers.fold import Contribution, RunFold
from resultlog.consumers.work import WorkProgress, run_tasks
from resultlog.kafka import KafkaConnection
from resultlog.schemas import (
    ConfigurationError,
    DecodeError,
    FoldView,
    Location,
    RunKey,
    SampleResult,
    decode_key,
    encode_key,
    run_key_prefix,
)

__all__ = [
    "Covered",
    "LoadedViews",
    "ResumeState",
    "RunRecords",
    "RunStatus",
    "latest_run_values",
    "read_run_records",
    "read_run_views",
    "read_run_views_to",
    "resume_state",
    "run_keys_of",
    "run_status",
]

log = logging.getLogger(__name__)
_Decoded = TypeVar("_Decoded", SampleResult, FoldView)
_Item = TypeVar("_Item")
_STOP_EVERY = 1000  # messages read between looks at a reader's stop event


@dataclass(frozen=True)
class ResumeState(Generic[_Decoded]):
    """What a worker may skip and what seeds its accumulator (whole records or fold views)."""

    seeds: tuple[_Decoded, ...] = ()
    degraded: tuple[_Decoded, ...] = ()
    out_of_range: int = 0
    undecodable: int = 0
    skip_list: frozenset[tuple[int, int]] = field(default_factory=frozenset)

    @classmethod
    def of(
        cls, records: list[_Decoded], epochs: int, undecodable: int = 0
    ) -> ResumeState[_Decoded]:
        """Sort a run key's latest records into seeds, degraded ones and ignored ones."""
        with _building():
            records = _latest_per_key(records)
            in_range = [r for r in records if 0 <= r.epoch < epochs]
            seeds = tuple(r for r in in_range if not r.degraded)
            return ResumeState(
                seeds=seeds,
                degraded=tuple(r for r in in_range if r.degraded),
                out_of_range=len(records) - len(in_range),
                undecodable=undecodable,
                skip_list=frozenset((r.sample_index, r.epoch) for r in seeds),
            )


@contextmanager
def _building() -> Iterator[None]:
    """Hold Python's cyclic garbage collector back while a run's records are built or sorted.

    None of them is garbage, yet each collection the allocations start traverses them all
    again: about half the time of a 20k-record resume. Left off if it was off; another
    thread's collections only wait until the block ends.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Covered(NamedTuple):
    """Where a read's latest records lie: their partition and first and last offsets."""

    partition: int
    first: int
    last: int


class RunRecords(NamedTuple):
    """A run key's latest records, how many latest values could not be decoded (by kind), and
    the offsets of the latest values read (None when there were none, or not from Kafka)."""

    records: list[SampleResult]
    undecodable: int
    reasons: Mapping[str, int] = MappingProxyType({})
    covered: Covered | None = None


def _latest_per_key(records: list[_Decoded]) -> list[_Decoded]:
    """One record per (sample_index, epoch): a store may repeat a key; the newest wins."""
    latest: dict[tuple[int, int], _Decoded] = {}
    for record in records:
        key = (record.sample_index, record.epoch)
        old = latest.get(key)
        if old is None or (record.created_at_ms, not record.degraded) > (
            old.created_at_ms,
            not old.degraded,
        ):
            latest[key] = record
    return list(latest.values())


def read_run_records(
    kafka: KafkaConnection,
    run_key: RunKey,
    *,
    timeout_s: float = 30.0,
    samples: range | None = None,
    stop: threading.Event | None = None,
) -> RunRecords:
    """The latest record of every key of `run_key`, and how many latest values were undecodable.

    Reads the run key's one partition (through the run index: only where its records lie)
    up to the high watermark taken when it starts. Values of other run keys are never
    decoded: keys are filtered by byte prefix and only the latest value per key is decoded
    at the end. With `samples` (a chunk's
    range of sample indexes), only the values of those samples' keys are decoded. Once
    `stop` is set, reading gives up (ConsumerError).
    """
    partition, _, latest = _latest_values_to_end(kafka, run_key, timeout_s, stop)
    records, reasons = _decode_latest(kafka, latest, partition, decode_value, samples)
    offsets = [offset for offset, _ in latest.values()]
    covered = Covered(partition, min(offsets), max(offsets)) if offsets else None
    return RunRecords(records, reasons.total(), MappingProxyType(dict(reasons)), covered)


def _decode_latest(
    kafka: KafkaConnection,
    latest: dict[bytes, tuple[int, bytes]],
    partition: int,
    decode: Callable[..., _Decoded],
    samples: range | None = None,
) -> tuple[list[_Decoded], Counter[str]]:
    """Decode each key's latest value (of `samples` only, if given); count the undecodable."""
    reasons: Counter[str] = Counter()

    def one(raw_key: bytes, item: tuple[int, bytes]) -> _Decoded | None:
        return _decode_one(kafka, raw_key, item, partition, decode, samples=samples, why=reasons)

    return _each_latest(latest, one), reasons


def _decode_views(
    kafka: KafkaConnection,
    run_key: RunKey,
    latest: dict[bytes, tuple[int, bytes]],
    partition: int,
    samples: range | None = None,
) -> tuple[list[FoldView], Counter[str]]:
    """`_decode_latest` into fold views, the common record in one pass (`Ingestor.read`):
    the same views, in the same order, and the same refusals."""
    ingestor = Ingestor(kafka.codec, kafka.settings.partitions)
    ingestor.expect(run_key, partition)
    reasons: Counter[str] = Counter()

    def one(raw_key: bytes, item: tuple[int, bytes]) -> FoldView | None:
        prefix = ingestor.read(raw_key, item[1], partition)
        if prefix is None:
            return _decode_one(
                kafka, raw_key, item, partition, decode_view, samples=samples, why=reasons
            )
        if samples is None or prefix.sample_index in samples:
            return view_of(prefix)
        return None

    return _each_latest(latest, one), reasons


def _each_latest(
    latest: dict[bytes, tuple[int, bytes]],
    one: Callable[[bytes, tuple[int, bytes]], _Item | None],
) -> list[_Item]:
    """What `one` makes of each key's latest (offset, value), in order, but for its Nones."""
    made: list[_Item] = []
    with _building():
        for raw_key, item in latest.items():
            got = one(raw_key, item)
            if got is not None:
                made.append(got)
    return made


def _decode_one(
    kafka: KafkaConnection,
    raw_key: bytes,
    latest: tuple[int, bytes],
    partition: int,
    decode: Callable[..., _Decoded],
    *,
    samples: range | None,
    why: Counter[str],
) -> _Decoded | None:
    """One key's latest (offset, value) decoded; None when not of `samples`, or undecodable
    (counted by kind in `why`, and said once)."""
    offset, value = latest
    try:
        key = decode_key(raw_key)
        if samples is not None and key.sample_index not in samples:
            return None
        at = Location(kafka.results_topic, partition, offset)
        return decode(kafka.codec, key, value, at)
    except ConfigurationError:
        raise  # e.g. registry-framed records and no registry: not garbage, a reader to fix
    except DecodeError as exc:
        why[reason_kind(exc)] += 1
        log.warning("resume ignores an undecodable record: %s", exc)
        return None


@dataclass(frozen=True, eq=False)
class LoadedViews:
    """A run key's latest records as fold views; any one of them can be decoded whole.

    Keeps each view's raw value (far smaller than a decoded record) for `full`, so that a
    reader which needs a few whole records (a configuration to name) decodes only those.
    """

    records: list[FoldView]
    undecodable: int
    reasons: Mapping[str, int]
    _full: Callable[[FoldView], SampleResult] = field(repr=False)

    def full(self, view: FoldView) -> SampleResult:
        """The whole record the view was read from."""
        return self._full(view)


def read_run_views(
    kafka: KafkaConnection,
    run_key: RunKey,
    *,
    timeout_s: float = 30.0,
    samples: range | None = None,
) -> LoadedViews:
    """`read_run_records`, decoding only each latest record's fold view (see LoadedViews)."""
    return read_run_views_to(kafka, run_key, timeout_s=timeout_s, samples=samples)[0]


def read_run_views_to(
    kafka: KafkaConnection,
    run_key: RunKey,
    *,
    timeout_s: float = 30.0,
    samples: range | None = None,
) -> tuple[LoadedViews, dict[str, int]]:
    """`read_run_views`, and the offsets read up to ({partition: high watermark}), as a
    summary's `as_of.offsets` names them."""
    partition, end, latest = _latest_values_to_end(kafka, run_key, timeout_s)
    views, reasons = _decode_views(kafka, run_key, latest, partition, samples)
    topic, codec = kafka.results_topic, kafka.codec

    def full(view: FoldView) -> SampleResult:
        key = encode_key(run_key, view.sample_index, view.epoch)
        offset, value = latest[key]
        return decode_value(codec, decode_key(key), value, Location(topic, partition, offset))

    loaded = LoadedViews(views, reasons.total(), MappingProxyType(dict(reasons)), full)
    return loaded, {str(partition): end}


def latest_run_values(
    kafka: KafkaConnection, run_key: RunKey, *, timeout_s: float = 30.0
) -> tuple[int, dict[bytes, tuple[int, bytes]]]:
    """The run key's partition and, per live key of the run, its latest (offset, raw value)."""
    partition, _, latest = _latest_values_to_end(kafka, run_key, timeout_s)
    return partition, latest


def _latest_values_to_end(
    kafka: KafkaConnection, run_key: RunKey, timeout_s: float, stop: threading.Event | None = None
) -> tuple[int, int, dict[bytes, tuple[int, bytes]]]:
    """The run key's partition, the high watermark read to, and its live keys' latest values."""
    topic = kafka.results_topic
    prefix = run_key_prefix(run_key)
    latest: dict[bytes, tuple[int, bytes]] = {}
    try:
        with read_run(kafka, run_key, timeout_s) as found:
            for count, message in enumerate(found.messages):
                if stop is not None and count % _STOP_EVERY == 0 and stop.is_set():
                    raise ConsumerError(f"stopped reading {topic} for {run_key}")
                key = message.key()
                if key is not None and key.startswith(prefix):
                    value = message.value()
                    if value is None:  # a tombstone deletes the key
                        latest.pop(key, None)
                    else:
                        latest[key] = (message.offset() or 0, value)
            return found.partition, found.end, latest
    except KafkaException as exc:
        raise ConsumerError(f"cannot read {topic} for {run_key}: {exc.args[0]}") from exc


def run_keys_of(
    kafka: KafkaConnection, run_id: str | None, *, timeout_s: float = 30.0
) -> list[RunKey]:
    """The run keys of `run_id` (None: of every run) with a live record: from the run index's
    entries and the keys past its "indexed through", or from every key of a partition it
    cannot speak for."""
    topic = kafka.results_topic
    consumer = kafka.reader()
    found: set[RunKey] = set()
    candidates: set[RunKey] = set()  # named by the index or a tail: live if they have records
    try:
        count = kafka.partition_count(topic, consumer, timeout_s=timeout_s)
        for partition in range(count):
            try:
                entries, through = index_partition(kafka, consumer, partition, timeout_s)
            except UnusableIndexError as exc:
                which = "every run" if run_id is None else f"run {run_id}"
                log.info("reading all of %s[%d] for %s: %s", topic, partition, which, exc)
                found |= _live_run_keys(consumer, topic, partition, None, timeout_s)
                continue
            candidates |= {k for k in map(_prefix_run_key, entries) if k is not None}
            candidates |= _live_run_keys(consumer, topic, partition, through, timeout_s)
    except KafkaException as exc:
        which = "every run" if run_id is None else f"run {run_id}"
        raise ConsumerError(f"cannot read {topic} for {which}: {exc.args[0]}") from exc
    finally:
        consumer.close()
    mine = {key for key in candidates - found if run_id is None or key.run_id == run_id}
    found |= {key for key in mine if latest_run_values(kafka, key, timeout_s=timeout_s)[1]}
    return sorted(key for key in found if run_id is None or key.run_id == run_id)


def _live_run_keys(
    consumer: Consumer, topic: str, partition: int, start: int | None, timeout_s: float
) -> set[RunKey]:
    """The run keys with a live record among one partition's keys (values unread): all of
    them, or (with `start`) those from `start` on."""
    run_keys: dict[bytes, RunKey | None] = {}  # each distinct key decoded once
    live: dict[bytes, bool] = {}
    low, high = watermark_offsets(consumer, TopicPartition(topic, partition), timeout_s)
    begin = low if start is None else max(low, start)
    for message in scan_ranges(consumer, topic, partition, [(begin, high)], timeout_s):
        raw = message.key()
        if raw is None:
            continue
        if raw not in run_keys:
            run_keys[raw] = _run_key_or_none(raw)
        live[raw] = message.value() is not None
    return {key for raw, alive in live.items() if alive and (key := run_keys[raw]) is not None}


def _run_key_or_none(raw: bytes) -> RunKey | None:
    try:
        return decode_key(raw).run_key
    except DecodeError:
        return None  # not a record key: no one's run


def _prefix_run_key(prefix: bytes) -> RunKey | None:
    """The run key of an index entry's key (a run key prefix)."""
    return _run_key_or_none(prefix + b"0/0")


def resume_state(
    kafka: KafkaConnection, run_key: RunKey, epochs: int, *, timeout_s: float = 30.0
) -> ResumeState[FoldView]:
    """Read the fold views of the run key's records and sort them into a ResumeState."""
    loaded = read_run_views(kafka, run_key, timeout_s=timeout_s)
    return ResumeState.of(loaded.records, epochs, loaded.undecodable)


@dataclass(frozen=True)
class RunStatus:
    """The resume view of a run key: what a re-run would skip and what it would retry."""

    run_key: RunKey
    records: int
    expected_records: int | None
    completed: int
    degraded: int
    skip_list: int
    out_of_range: int
    undecodable: int
    spent_cost: float = 0.0
    config: dict[str, object] | None = None  # the newest configured record's configuration
    config_fingerprint: str | None = None
    configs: int = 0  # distinct configurations among the records
    unconfigured: int = 0  # records without one (schema v1)
    chunks: WorkProgress | None = None  # None: the run has no chunk task on the work topic

    def as_json(self) -> dict[str, object]:
        """The view with the run key's parts as separate fields, as `status --json` prints it."""
        fields = {k: v for k, v in vars(self).items() if k not in ("run_key", "chunks")}
        run_key = self.run_key
        parts = {"run_id": run_key.run_id, "benchmark_id": run_key.benchmark_id}
        chunks = None if self.chunks is None else self.chunks.as_json()
        return {**parts, "model": run_key.model, **fields, "chunks": chunks}


def run_status(
    kafka: KafkaConnection, run_key: RunKey, epochs: int | None = None, group: str | None = None
) -> RunStatus:
    """The resume view of a run key; `epochs` defaults to the run's shape (its newest record).

    With chunk tasks of the run on the work topic, it also says which chunks the worker
    `group` (default: the settings' work group) has done, is running, or has yet to start.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        tasks = pool.submit(run_tasks, kafka, run_key)  # the work topic, read beside the run
        loaded = read_run_views(kafka, run_key)
        found = tasks.result()
    folded = RunFold(run_key)
    for view in loaded.records:
        folded.offer(Contribution.of(view))
    shape = folded.shape
    state = ResumeState.of(
        loaded.records, epochs or (shape.epochs if shape else 1), loaded.undecodable
    )
    summary = folded.summary()
    # config and config_fingerprint are set together (a SampleResult rule)
    configured = [view for view in loaded.records if view.config_fingerprint is not None]
    newest = max(configured, key=lambda view: view.created_at_ms, default=None)
    return RunStatus(
        run_key=run_key,
        records=len(loaded.records),
        expected_records=summary.expected_records,
        completed=len(state.seeds),
        degraded=len(state.degraded),
        skip_list=len(state.skip_list),
        out_of_range=state.out_of_range,
        undecodable=state.undecodable,
        spent_cost=summary.spent_cost,
        config=_config_of(_whole(loaded, newest)),
        config_fingerprint=newest.config_fingerprint if newest is not None else None,
        configs=len({record.config_fingerprint for record in configured}),
        unconfigured=len(loaded.records) - len(configured),
        chunks=WorkProgress.read(
            kafka, run_key, loaded.records, group or kafka.settings.work_group, found
        ),
    )


def _whole(loaded: LoadedViews, view: FoldView | None) -> SampleResult | None:
    """The whole record of a view; None (and a warning) if its bytes after the view are bad."""
    if view is None:
        return None
    try:
        return loaded.full(view)
    except DecodeError as exc:
        log.warning("status cannot read the configuration of the newest record: %s", exc)
        return None


def _config_of(record: SampleResult | None) -> dict[str, object] | None:
    """A record's configuration as a JSON object (one that is not an object, as its text)."""
    if record is None or record.config is None:
        return None
    config = json.loads(record.config)  # JsonText: the record's contract says it parses
    return config if isinstance(config, dict) else {"text": record.config}
