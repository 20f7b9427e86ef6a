"""The aggregator's in-memory state: per assigned partition, one RunFold per run key.

Not thread-safe by itself. The Aggregator's rule: only its consumer thread mutates this state,
always under the lock; readers hold the lock and compute nothing unless told to (`compute`),
asking instead for summaries the consumer thread computes between batches (`take_jobs`).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypedDict, Unpack

from resultlog.consumers.aggregator._health import Health, PartitionHealth
from resultlog.consumers.aggregator.store import PartitionStore
from resultlog.consumers.fold import Contribution, RunFold
from resultlog.schemas import AsOf, RecordId, RunKey, RunSummary, SampleResult, partition_for

__all__ = [
    "AggregatorState",
    "Job",
    "Lookup",
    "PartitionState",
    "RunFilter",
    "RunsPage",
    "RunsQuery",
    "Shared",
    "utc_now",
]


@dataclass
class _Run:
    """One run key's fold, its cached summary and what was last published for it."""

    fold: RunFold
    version: int = 0
    cached: RunSummary | None = None
    cached_version: int = -1
    published: RunSummary | None = None  # without as_of, to skip unchanged publications

    @property
    def fresh(self) -> bool:
        """Whether the cached summary reflects every record applied so far."""
        return self.cached is not None and self.cached_version == self.version


@dataclass(frozen=True)
class Job:
    """A summary for the consumer thread to compute outside the lock."""

    run: _Run
    version: int
    as_of: AsOf

    def compute(self) -> RunSummary:
        """The fold's summary (safe unlocked only on the thread that mutates the folds)."""
        return self.run.fold.summary(self.as_of)


@dataclass
class PartitionState:
    """What one assigned partition holds and how far it has been read."""

    partition: int
    position: int  # next offset to read
    high_at_assign: int | None  # None: unknown, catching up needs end-of-partition
    high: int
    caught_up: bool = False
    runs: dict[RunKey, _Run] = field(default_factory=dict)
    dirty: set[RunKey] = field(default_factory=set)
    store: PartitionStore | None = None  # where the runs' per-key state lives (else memory)
    # The summaries topic's values of this partition (summaries, tombstones, garbage), as far
    # as read: its summaries are served marked stale until the partition is caught up.
    stale: Mapping[RunKey, object] = field(default_factory=dict)
    restore: tuple[int, int] | None = None  # while its store restores: changelog read, of

    def stale_summaries(self) -> dict[RunKey, RunSummary]:
        """The summaries topic's summaries of this partition (nothing once caught up)."""
        if self.caught_up:
            return {}
        held = list(self.stale.items())  # one C call: safe while the consumer thread adds
        return {k: v for k, v in held if isinstance(v, RunSummary)}

    def new_fold(self, run_key: RunKey) -> RunFold:
        """An empty fold of a run of this partition."""
        return RunFold(run_key) if self.store is None else self.store.new_fold(run_key)

    def save_due(self) -> None:
        """At a record boundary: flush the store if its pending writes filled the cache."""
        if self.store is not None and self.store.flush_due():
            self.store.flush(self.position, wait=False)

    @property
    def lag(self) -> int:
        """Records between the read position and the latest known high watermark."""
        return max(0, self.high - self.position)

    def advance(self, offset: int) -> None:
        """Record that `offset` was consumed."""
        self.position = max(self.position, offset + 1)
        self.high = max(self.high, self.position)
        if self.high_at_assign is not None and self.position >= self.high_at_assign:
            self.caught_up = True

    def reached_end(self, offset: int) -> None:
        """The consumer reported the end of the partition at `offset`."""
        self.position = max(self.position, offset)
        self.high = max(self.high, offset)
        self.caught_up = True

    def as_of(self, now: datetime) -> AsOf:
        """Freshness of a summary computed from this partition now."""
        return AsOf(
            computed_at=now, source="aggregator", offsets={str(self.partition): self.position}
        )

    def summary(self, run_key: RunKey, now: datetime) -> RunSummary | None:
        """The run's current summary (cached until the run changes); None when it is empty."""
        run = self.runs.get(run_key)
        if run is None or not len(run.fold):
            return None
        if run.cached is None or run.cached_version != run.version:
            run.cached = run.fold.summary(self.as_of(now))
            run.cached_version = run.version
        return run.cached


@dataclass(frozen=True)
class RunFilter:
    """Which runs a listing holds: every part given must equal the run key's."""

    run_id: str | None = None
    benchmark: str | None = None
    model: str | None = None

    def matches(self, run_key: RunKey) -> bool:
        """Whether the run key has every part this filter gives."""
        return (
            (self.run_id is None or run_key.run_id == self.run_id)
            and (self.benchmark is None or run_key.benchmark_id == self.benchmark)
            and (self.model is None or run_key.model == self.model)
        )


EVERY_RUN = RunFilter()


class RunsQuery(TypedDict, total=False):
    """Which served runs a page holds, in run key order: those `where` matches (default:
    every run), after `after` (default: from the first), at most `limit` (default: all)."""

    where: RunFilter
    after: RunKey | None
    limit: int | None


@dataclass(frozen=True)
class RunsPage:
    """One page of the served runs: its summaries, how many runs match in all, and the run
    key to continue after (None: this is the last page)."""

    summaries: list[RunSummary]
    total: int
    next_after: RunKey | None
    stale: frozenset[RunKey] = frozenset()  # served from the summaries topic while rebuilding


@dataclass(frozen=True)
class Lookup:
    """The answer to "what is this run's summary?"."""

    summary: RunSummary | None
    partition: int
    assigned: bool
    rebuilding: bool
    stale: bool = False  # the summaries topic's summary, served while the partition rebuilds


class AggregatorState:
    """Per-partition folds of the results topic, as far as this instance has read it."""

    def __init__(self, num_partitions: int) -> None:
        self.num_partitions = num_partitions
        self.partitions: dict[int, PartitionState] = {}
        self.running = False
        self.joined = False
        self.wanted: dict[RunKey, int] = {}  # run key -> partition, summaries readers await

    def assign(
        self, partition: int, low: int, high: int | None, store: PartitionStore | None = None
    ) -> None:
        """Start (or restart) folding a partition from its beginning."""
        start = max(low, 0)
        known_high = high if high is not None else start
        state = PartitionState(partition, start, high, known_high, store=store)
        state.caught_up = high is not None and high <= start
        self.partitions[partition] = state

    def restore(
        self,
        partition: int,
        high: int | None,
        next_offset: int,
        folds: dict[RunKey, RunFold],
        store: PartitionStore | None = None,
    ) -> None:
        """Start folding a partition from saved state: its folds cover the offsets below
        `next_offset`. Every run is published once caught up, as after a full rebuild."""
        known_high = high if high is not None else next_offset
        state = PartitionState(
            partition, next_offset, high, max(known_high, next_offset), store=store
        )
        state.caught_up = high is not None and high <= next_offset
        state.runs = {run_key: _Run(fold) for run_key, fold in folds.items()}
        state.dirty = set(folds)
        self.partitions[partition] = state

    def revoke(self, partition: int, *, lost: bool = False) -> None:
        """Forget a partition: its runs are no longer this instance's to serve or publish
        (its store keeps what was flushed, and unless `lost` what was read since: a lost
        partition may have another owner already, whose changelog it is now)."""
        state = self.partitions.pop(partition, None)
        if state is not None and state.store is not None:
            if not lost:
                state.store.flush(state.position)
            state.store.close()
        if not self.partitions:  # holding nothing (all lost, say): not a member that serves
            self.joined = False

    def put(
        self, partition: int, offset: int, record_id: RecordId, record: Contribution | SampleResult
    ) -> None:
        """Apply a decoded record's contribution: it replaces whatever its key held."""
        state = self.partitions.get(partition)
        if state is None:
            return
        run_key = record_id.run_key
        run = state.runs.get(run_key)
        if run is None:
            run = state.runs[run_key] = _Run(state.new_fold(run_key))
        run.fold.apply(record)
        self._touched(state, run_key, run, offset)
        state.save_due()

    def put_run(
        self, partition: int, run_key: RunKey, items: Sequence[tuple[int, Contribution]]
    ) -> None:
        """`put` each of these consecutive records of one run key, read in offset order, with
        the run's bookkeeping done once (and before each flush a full store asks for)."""
        state = self.partitions.get(partition)
        if state is None or not items:
            return
        run = state.runs.get(run_key)
        if run is None:
            run = state.runs[run_key] = _Run(state.new_fold(run_key))
        fold, store = run.fold, state.store
        if store is None:
            for _, contribution in items:
                fold.apply(contribution)
        else:
            done = 0
            while done < len(items):
                done = store.fold_until_full(fold, items, done)
                if store.flush_due():
                    self._touched(state, run_key, run, items[done - 1][0])
                    store.flush(state.position, wait=False)
        self._touched(state, run_key, run, items[-1][0])

    def delete(self, partition: int, offset: int, record_id: RecordId) -> None:
        """Forget a key: a tombstone, or a latest value that cannot be decoded."""
        state = self.partitions.get(partition)
        if state is None:
            return
        run = state.runs.get(record_id.run_key)
        if run is not None:
            run.fold.remove(record_id.sample_index, record_id.epoch)
            self._touched(state, record_id.run_key, run, offset)
            state.save_due()
        else:
            state.advance(offset)

    def advance(self, partition: int, offset: int) -> None:
        """Record that a message that changes no run was consumed."""
        state = self.partitions.get(partition)
        if state is not None:
            state.advance(offset)

    def reached_end(self, partition: int, offset: int) -> None:
        """The consumer reported the end of a partition."""
        state = self.partitions.get(partition)
        if state is not None:
            state.reached_end(offset)

    def observe_high(self, partition: int, high: int) -> None:
        """A newer high watermark for the lag figures."""
        state = self.partitions.get(partition)
        if state is not None:
            state.high = max(state.high, high)

    def lookup(self, run_key: RunKey, now: datetime, *, compute: bool) -> Lookup | None:
        """The run's summary if served here; None (and a wish) if it must be computed first."""
        partition = partition_for(run_key, self.num_partitions)
        state = self.partitions.get(partition)
        if state is None:
            return Lookup(None, partition, assigned=False, rebuilding=False)
        if not state.caught_up:
            held = state.stale.get(run_key)
            if isinstance(held, RunSummary):
                return Lookup(held, partition, assigned=True, rebuilding=True, stale=True)
            return Lookup(None, partition, assigned=True, rebuilding=True)
        run = state.runs.get(run_key)
        if run is not None and len(run.fold) and not run.fresh and not compute:
            self.wanted[run_key] = partition
            return None
        return Lookup(state.summary(run_key, now), partition, assigned=True, rebuilding=False)

    def page(self, now: datetime, *, compute: bool, **query: Unpack[RunsQuery]) -> RunsPage | None:
        """The runs `query` asks for and how many match in all; None (and wishes) if a
        summary must be computed first."""
        where = query.get("where", EVERY_RUN)
        after, limit = query.get("after"), query.get("limit")
        served: list[tuple[RunKey, PartitionState | RunSummary]] = [
            (run_key, state)
            for state in self.partitions.values()
            if state.caught_up
            for run_key, run in state.runs.items()
            if len(run.fold) and where.matches(run_key)
        ]
        served.extend(
            (run_key, summary)
            for state in self.partitions.values()
            for run_key, summary in state.stale_summaries().items()
            if where.matches(run_key)
        )
        matching = sorted(served, key=lambda item: item[0])
        start = 0 if after is None else bisect.bisect_right(matching, after, key=lambda i: i[0])
        end = len(matching) if limit is None else start + limit
        chosen = matching[start:end]
        unfresh = {
            k: s.partition
            for k, s in chosen
            if isinstance(s, PartitionState) and not s.runs[k].fresh
        }
        if unfresh and not compute:
            self.wanted.update(unfresh)
            return None
        summaries = [
            summary
            for k, s in chosen
            if (summary := s.summary(k, now) if isinstance(s, PartitionState) else s) is not None
        ]
        stale = frozenset(k for k, s in chosen if isinstance(s, RunSummary))
        more = end < len(matching) and bool(chosen)
        return RunsPage(summaries, len(matching), chosen[-1][0] if more else None, stale)

    def summaries(
        self, now: datetime, *, compute: bool, **query: Unpack[RunsQuery]
    ) -> list[RunSummary] | None:
        """The summaries of the runs `query` asks for; None (and wishes) if stale."""
        found = self.page(now, compute=compute, **query)
        return None if found is None else found.summaries

    def want_changed(self, partitions: set[int] | None = None) -> None:
        """Ask for the summaries of changed runs of caught-up partitions (to publish them)."""
        for number, state in self.partitions.items():
            if state.caught_up and (partitions is None or number in partitions):
                self.wanted.update(dict.fromkeys(state.dirty, number))

    def take_jobs(self, now: datetime) -> list[Job]:
        """The summaries wished for that are not fresh yet; clears the wishes."""
        jobs = []
        for run_key, partition in self.wanted.items():
            state = self.partitions.get(partition)
            run = state.runs.get(run_key) if state is not None else None
            if state is not None and run is not None and len(run.fold) and not run.fresh:
                jobs.append(Job(run, run.version, state.as_of(now)))
        self.wanted.clear()
        return jobs

    @staticmethod
    def cache_summaries(jobs: list[Job], summaries: list[RunSummary]) -> None:
        """Cache summaries computed outside the lock."""
        for job, summary in zip(jobs, summaries, strict=True):
            if job.version >= job.run.cached_version:
                job.run.cached, job.run.cached_version = summary, job.version

    def changed(
        self, now: datetime, partitions: set[int] | None = None
    ) -> tuple[list[tuple[RunKey, RunSummary | None]], bool]:
        """Publications (None: a tombstone) of changed runs whose summaries are computed, and
        whether no changed run is left (one still stale waits for the next call)."""
        out: list[tuple[RunKey, RunSummary | None]] = []
        finished = True
        for number, state in self.partitions.items():
            if not state.caught_up or (partitions is not None and number not in partitions):
                continue
            for run_key in sorted(state.dirty):
                run = state.runs.get(run_key)
                if run is not None and len(run.fold) and not run.fresh:
                    finished = False
                    continue
                state.dirty.discard(run_key)
                out.extend(_publication(state, run_key, now))
        return out, finished

    def republish(self, run_key: RunKey) -> None:
        """A publication failed: publish the run again at the next chance."""
        state = self.partitions.get(partition_for(run_key, self.num_partitions))
        if state is not None and run_key in state.runs:
            state.runs[run_key].published = None
            state.dirty.add(run_key)

    def health(self) -> Health:
        """Per-partition progress and readiness."""
        return Health(
            running=self.running,
            joined=self.joined,
            partitions=tuple(
                PartitionHealth(
                    partition=p.partition,
                    position=p.position,
                    high_watermark=p.high,
                    lag=p.lag,
                    caught_up=p.caught_up,
                    runs=sum(1 for run in p.runs.values() if len(run.fold)),
                    restoring=p.restore,
                )
                for _, p in sorted(self.partitions.items())
            ),
        )

    def runs_tracked(self) -> int:
        """Non-empty runs held across assigned partitions."""
        return sum(1 for p in self.partitions.values() for run in p.runs.values() if len(run.fold))

    def save(self, older_than_s: float) -> None:
        """Flush the stores not flushed for `older_than_s`: a restart reads a short tail."""
        now = time.monotonic()
        for state in self.partitions.values():
            store = state.store
            if store is None:
                continue
            store.land()  # the flush in flight, once acknowledged
            if store.whole_due:  # a new changelog: the state goes to it before anything else
                store.flush(state.position, wait=False)
                continue
            if now - store.flushed_at < older_than_s:
                continue
            if store.pending or store.covers != state.position:
                store.flush(state.position, wait=False)

    def close(self) -> None:
        """Flush and close every store (the partitions stay, holding nothing more)."""
        for state in self.partitions.values():
            if state.store is not None:
                state.store.flush(state.position)
                state.store.close()
                state.store = None

    @staticmethod
    def _touched(state: PartitionState, run_key: RunKey, run: _Run, offset: int) -> None:
        run.version += 1
        state.dirty.add(run_key)
        state.advance(offset)
        if state.store is not None:
            state.store.touched(run.fold)


class Shared:
    """The state and the one lock guarding it: the consumer thread mutates, readers read."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.computed = threading.Condition(self.lock)  # notified when summaries are stored
        self.state = AggregatorState(num_partitions=1)


def _publication(
    state: PartitionState, run_key: RunKey, now: datetime
) -> list[tuple[RunKey, RunSummary | None]]:
    """What to publish for one changed run: nothing if unchanged, a tombstone if emptied."""
    summary = state.summary(run_key, now)
    if summary is None:
        # Every key of the run was deleted: drop it here and on the summaries topic.
        state.runs.pop(run_key, None)
        return [(run_key, None)]
    run = state.runs[run_key]
    bare = summary.model_copy(update={"as_of": None})
    if bare == run.published:
        return []
    run.published = bare
    return [(run_key, summary)]


def utc_now() -> datetime:
    """The time stamped into as_of."""
    return datetime.now(UTC)
