"""The fold: one run key's latest records into a RunSummary, exact and incremental.

The worker, the aggregator and replay all call this module, so their summaries agree bit for
bit. Nothing here sums floats in arrival order. Every finite double is an integer multiple of
2**-1074, so each float is added as that exact integer (`_scaled`) and divided once when a
summary is made: a sum rounded once equals `math.fsum`, and a mean rounded once is the
correctly rounded mean. Counts are integers. The result depends only on the set of latest
records, never on their order, duplicates or restarts, and applying or removing one record
updates the totals in O(1): a summary is never re-folded.

Rules (docs/design.md, rules 8, 12 and 13): the run's shape is the `epochs`, `dataset_size`
and `selected_samples` of its newest record (greatest created_at, ties broken by key); records
outside it are folded by no one and counted as `out_of_shape`, and `expected_records` counts
its selection's pairs. `spent_cost` is the one total over every latest
record, in shape or not: money spent stays spent. A per-sample score (a metric named
`scorer:...`) is reduced as Inspect reduces a scorer (`_scored`), not as a record metric.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from fractions import Fraction
from math import lcm
from typing import NamedTuple

from resultlog.consumers._contribution import (
    ONE,
    Contribution,
    Key,
    Memo,
    Shape,
    Tokens,
    Verdict,
)
from resultlog.consumers._contribution import scaled as _scaled
from resultlog.consumers._scored import SCORER_PREFIX, STDERR_SUFFIX, ScorerTotals
from resultlog.schemas import AsOf, FoldView, RunKey, RunSummary, SampleResult, SummaryUsage

__all__ = [
    "Contribution",
    "FoldState",
    "Latest",
    "RunFold",
    "Sample",
    "Samples",
    "Shape",
    "Tokens",
    "fold_records",
]

_ONE = ONE  # 1.0 as an exact scaled integer
_HALF_SHIFT = ONE.bit_length() - 2  # x >> _HALF_SHIFT is floor(x / (_ONE / 2))


class _Sample(NamedTuple):
    """One sample's epochs inside the shape: how many, how many not S, their scaled sum.

    Immutable and interned: most samples of a run are in one of a few states (e.g. every
    epoch correct), so they share one object instead of holding their own large integer.
    """

    epochs: int = 0
    kept: int = 0
    points: int = 0


_NO_SAMPLE = _Sample()
_samples: Memo[tuple[int, int, int], _Sample] = Memo(lambda values: _Sample(*values))


def _sample_of(epochs: int, kept: int, points: int) -> _Sample:
    """The one _Sample object of these values."""
    return _samples.of((epochs, kept, points))


Sample = _Sample
# Where a fold keeps its per-key and per-sample state: dicts by default; the aggregator passes
# disk-backed mappings (its state store), so memory holds only the totals below.
Latest = MutableMapping[Key, Contribution]
Samples = MutableMapping[str, _Sample]


@dataclass(frozen=True, slots=True)
class FoldState:
    """A fold's totals as plain values: what a state store saves to resume it without a
    refold (the per-key and per-sample state excluded). Sums are exact scaled integers."""

    spent: int
    newest: Contribution | None
    records: int
    degraded: int
    not_skipped: int
    tokens: tuple[int, int, int, int]
    cost: int
    generation_time_ms: int
    metric_sums: dict[str, int]
    metric_counts: dict[str, int]
    answered: int
    skipped: int
    correct: int
    points_by_kept: dict[int, int]
    # per `scorer:` metric, each scored sample's (epochs, scaled sum)
    scorers: dict[str, dict[str, tuple[int, int]]]


class _Plan:
    """What one verdict's metrics add to a run's totals: the record metrics (name, scaled
    value) and the per-sample scores (`scorer:` metrics), split and scaled once."""

    __slots__ = ("plain", "scorers")

    def __init__(self, verdict: Verdict) -> None:
        metrics = verdict.metrics
        self.plain = tuple(
            (name, _scaled(value)) for name, value in metrics if not name.startswith(SCORER_PREFIX)
        )
        self.scorers = tuple(
            (name, _scaled(value)) for name, value in metrics if name.startswith(SCORER_PREFIX)
        )


_PLANS_PER_RUN = 64  # what a summary sums over: a run's few verdicts, not its records
# By verdict object (hashed by identity): a record finds its plan in one lookup.
_plans: Memo[Verdict, _Plan] = Memo(_Plan, 1 << 12)


@dataclass(slots=True)
class _Totals:
    """Exact totals over the contributions inside the run's shape."""

    records: int = 0
    degraded: int = 0
    not_skipped: int = 0
    tokens: list[int] = field(default_factory=lambda: [0, 0, 0, 0])
    cost: int = 0
    generation_time_ms: int = 0
    # The record metrics' sums and counts (as resumed, and of plans past the first few);
    # the records not skipped under a run's first plans are counted per plan, summed when
    # asked. Per name, a count of 0 means the metric is absent (its sum is then 0 too).
    base_sums: dict[str, int] = field(default_factory=dict)
    base_counts: dict[str, int] = field(default_factory=dict)
    # Not a Counter: it defines __delitem__ in Python, which makes every store a slot call.
    by_plan: dict[_Plan, int] = field(default_factory=dict)
    scorers: dict[str, ScorerTotals] = field(default_factory=dict)
    samples: Samples = field(default_factory=dict)
    answered: int = 0
    skipped: int = 0
    correct: int = 0
    points_by_kept: dict[int, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, item: Contribution, sign: int) -> None:
        """Add (sign 1) or take away (sign -1) one contribution."""
        self.records += sign
        if item.degraded:
            self.degraded += sign
        tokens = self.tokens
        tokens[0] += sign * item.input_tokens
        tokens[1] += sign * item.output_tokens
        tokens[2] += sign * item.total_tokens
        tokens[3] += sign * item.reasoning_tokens
        if item.cost:
            # Added or taken away, never multiplied: these integers run to a thousand bits.
            if sign > 0:
                self.cost += _scaled(item.cost)
            else:
                self.cost -= _scaled(item.cost)
        self.generation_time_ms += sign * item.generation_time_ms
        points = item.points
        plan = _plans.of(item.verdict)
        if points is not None:
            self.not_skipped += sign
            if plan.plain:
                self._count_plan(plan, sign)
        for name, value in plan.scorers:  # a per-sample score: counted on S records too
            self._scorer(name, item.sample_id, value, sign)
        self._sample(item.sample_id, points, sign)

    def _count_plan(self, plan: _Plan, sign: int) -> None:
        """Count a record not skipped under its plan; past `_PLANS_PER_RUN` plans (metrics
        that vary by record), into the sums themselves. Either way the totals are the same
        sums of the same integers, so a record added one way may leave the other."""
        by_plan = self.by_plan
        count = by_plan.get(plan)
        if count is not None or len(by_plan) < _PLANS_PER_RUN:
            count = (count or 0) + sign
            if count:
                by_plan[plan] = count
            else:
                del by_plan[plan]
            return
        sums, counts = self.base_sums, self.base_counts
        for name, value in plan.plain:
            if sign > 0:  # never multiplied: these integers run to a thousand bits
                sums[name] = sums.get(name, 0) + value
            else:
                sums[name] = sums.get(name, 0) - value
            counts[name] = counts.get(name, 0) + sign

    def metric_totals(self) -> tuple[dict[str, int], dict[str, int]]:
        """Each record metric's exact scaled sum and count over the records not skipped
        (by name; a metric no such record has is absent)."""
        sums, counts = dict(self.base_sums), dict(self.base_counts)
        for plan, records in self.by_plan.items():
            for name, value in plan.plain:
                # Counts and sums, never a float: exact whatever the order of the plans.
                sums[name] = sums.get(name, 0) + value * records
                counts[name] = counts.get(name, 0) + records
        named = sorted(name for name, count in counts.items() if count)
        return {name: sums[name] for name in named}, {name: counts[name] for name in named}

    def _scorer(self, name: str, sample_id: str, points: int, sign: int) -> None:
        totals = self.scorers.get(name)
        if totals is None:
            totals = self.scorers[name] = ScorerTotals()
        totals.add(sample_id, points, sign)
        if not totals.samples:
            del self.scorers[name]

    def _sample(self, sample_id: str, points: int | None, sign: int) -> None:
        old = self.samples.get(sample_id, _NO_SAMPLE)
        self._count_sample(old, -1)  # a pooled sample: replaced, never changed
        if points is None:
            new = _sample_of(old.epochs + sign, old.kept, old.points)
        elif sign > 0:
            new = _sample_of(old.epochs + 1, old.kept + 1, old.points + points)
        else:
            new = _sample_of(old.epochs - 1, old.kept - 1, old.points - points)
        if new.epochs:
            self.samples[sample_id] = new
            self._count_sample(new, 1)
        else:
            self.samples.pop(sample_id, None)

    def _count_sample(self, sample: _Sample, sign: int) -> None:
        """Add or take away one sample's share of the per-sample totals."""
        if not sample.epochs:
            return
        if not sample.kept:
            self.skipped += sign
            return
        self.answered += sign
        if sign > 0:
            self.points_by_kept[sample.kept] += sample.points
        else:
            self.points_by_kept[sample.kept] -= sample.points
        # points / kept >= 1/2, as `points >= kept * _ONE / 2` without building the product
        self.correct += sign * ((sample.points >> _HALF_SHIFT) >= sample.kept)

    def accuracy(self) -> float:
        """Mean of the per-sample values, rounded once (0.0 without answered samples)."""
        if not self.answered:
            return 0.0
        common = lcm(*self.points_by_kept)
        numerator = sum(points * (common // kept) for kept, points in self.points_by_kept.items())
        return numerator / (common * self.answered * _ONE)

    def metrics(self) -> dict[str, float]:
        """Each metric's mean over the records not skipped (a missing metric counts as 0);
        each per-sample score's mean and stderr over the samples it scored."""
        sums, _ = self.metric_totals()
        means = {name: total / (self.not_skipped * _ONE) for name, total in sums.items()}
        for name, totals in self.scorers.items():
            means[name], means[name + STDERR_SUFFIX] = totals.mean(), totals.stderr()
        return dict(sorted(means.items()))


class RunFold:
    """The latest contribution per (sample_index, epoch) of one run key, and their totals."""

    def __init__(
        self,
        run_key: RunKey,
        latest: Latest | None = None,
        samples: Callable[[], Samples] | None = None,
    ) -> None:
        """An empty fold; `latest` and `samples` (a factory of an empty mapping) say where its
        per-key and per-sample state lives (dicts by default)."""
        self.run_key = run_key
        self._latest: Latest = {} if latest is None else latest
        self._new_samples: Callable[[], Samples] = dict if samples is None else samples
        self._newest: Contribution | None = None
        self._totals = _Totals(samples=self._new_samples())
        self._spent = 0

    def __len__(self) -> int:
        return len(self._latest)

    @property
    def spent(self) -> Fraction:
        """Every latest record's spent cost, summed exactly (`spent_cost` rounds it once)."""
        return Fraction(self._spent, _ONE)

    @property
    def shape(self) -> Shape | None:
        """The run's shape: that of its newest record (None while it has no record)."""
        return None if self._newest is None else self._newest.shape

    def apply(self, record: SampleResult | Contribution) -> None:
        """Take a record read in log order: it replaces whatever its key held."""
        self._put(_contribution(record))

    def offer(self, record: SampleResult | Contribution) -> None:
        """Take a record seen out of log order: it replaces its key's only if it is newer."""
        new = _contribution(record)
        old = self._latest.get((new.sample_index, new.epoch))
        if old is None or new.precedence() > old.precedence():
            self._put(new)

    def remove(self, sample_index: int, epoch: int) -> None:
        """Forget a key (its tombstone was read)."""
        old = self._latest.pop((sample_index, epoch), None)
        if old is None:
            return
        self._take(old)
        # By key, not identity: a disk-backed mapping may hand back an equal copy.
        if self._newest is not None and old.key == self._newest.key:
            self._set_newest(self._newest_of_all())

    def summary(self, as_of: AsOf | None = None) -> RunSummary:
        """The RunSummary of the latest contributions."""
        totals, shape = self._totals, self.shape
        expected = None if shape is None else shape.expected
        tokens = totals.tokens
        return RunSummary(
            run_id=self.run_key.run_id,
            benchmark_id=self.run_key.benchmark_id,
            model=self.run_key.model,
            records=totals.records,
            expected_records=expected,
            degraded_records=totals.degraded,
            total_questions=totals.answered,
            correct_answers=totals.correct,
            skipped_questions=totals.skipped,
            accuracy=totals.accuracy(),
            metrics=totals.metrics(),
            usage=SummaryUsage(
                input_tokens=tokens[0],
                output_tokens=tokens[1],
                total_tokens=tokens[2],
                reasoning_tokens=tokens[3],
                total_cost=totals.cost / _ONE,
            ),
            generation_time_ms=totals.generation_time_ms,
            spent_cost=self._spent / _ONE,
            out_of_shape=len(self._latest) - totals.records,
            as_of=as_of,
        )

    def _put(self, new: Contribution) -> None:
        key = new.key  # shared by every run's contribution of this (sample_index, epoch)
        old = self._latest.get(key)
        if old is not None:
            self._take(old)
        self._latest[key] = new
        self._spent += _scaled(new.spent)
        newest = self._newest
        # new.newness() > newest.newness(), without building the two tuples
        if newest is None or (new.created_at_ms, key) > (newest.created_at_ms, newest.key):
            newest = new
        elif old is not None and old.key == newest.key:  # the newest was replaced by an older one
            newest = self._newest_of_all() or new
        if not self._set_newest(newest) and _holds(newest.shape, key[0], key[1]):
            self._totals.add(new, 1)

    def _take(self, old: Contribution) -> None:
        """Take a contribution that is leaving `_latest` out of the totals."""
        self._spent -= _scaled(old.spent)
        shape = self.shape
        if shape is not None and _holds(shape, old.key[0], old.key[1]):
            self._totals.add(old, -1)

    def _set_newest(self, newest: Contribution | None) -> bool:
        """Make `newest` the run's newest record; refold everything if that changes the shape."""
        if newest is self._newest:  # the common case: the newest record stays
            return False
        before = self.shape
        self._newest = newest
        shape = self.shape
        if shape == before:
            return False
        # A new shape moves records in or out of the run: rare, so a full refold is fine.
        self._totals = _Totals(samples=self._new_samples())
        if shape is not None:
            for item in self._latest.values():
                if _holds(shape, item.key[0], item.key[1]):
                    self._totals.add(item, 1)
        return True

    def _newest_of_all(self) -> Contribution | None:
        return max(self._latest.values(), key=Contribution.newness, default=None)

    def state(self) -> FoldState:
        """The totals as plain values (the per-key and per-sample state excluded)."""
        t = self._totals
        tokens = t.tokens
        metric_sums, metric_counts = t.metric_totals()
        return FoldState(
            spent=self._spent,
            newest=self._newest,
            records=t.records,
            degraded=t.degraded,
            not_skipped=t.not_skipped,
            tokens=(tokens[0], tokens[1], tokens[2], tokens[3]),
            cost=t.cost,
            generation_time_ms=t.generation_time_ms,
            metric_sums=metric_sums,
            metric_counts=metric_counts,
            answered=t.answered,
            skipped=t.skipped,
            correct=t.correct,
            points_by_kept=dict(t.points_by_kept),
            scorers={name: totals.held() for name, totals in t.scorers.items()},
        )

    @classmethod
    def resume(
        cls,
        run_key: RunKey,
        state: FoldState,
        latest: Latest,
        samples: Callable[[], Samples],
        held_samples: Samples,
    ) -> RunFold:
        """The fold whose totals are `state` over the per-key state `latest` already holds
        and the per-sample state `held_samples` holds (no refold)."""
        # __init__ gets the held per-sample state: its own factory's empty mapping would clear
        # it (mypyc compiles no `cls.__new__(cls)`).
        resumed = cls(run_key, latest, lambda: held_samples)
        resumed._new_samples = samples
        resumed._spent, resumed._newest = state.spent, state.newest
        resumed._totals = _Totals(
            records=state.records,
            degraded=state.degraded,
            not_skipped=state.not_skipped,
            tokens=list(state.tokens),
            cost=state.cost,
            generation_time_ms=state.generation_time_ms,
            base_sums=dict(state.metric_sums),
            base_counts=dict(state.metric_counts),
            scorers={name: ScorerTotals.of_samples(held) for name, held in state.scorers.items()},
            samples=held_samples,
            answered=state.answered,
            skipped=state.skipped,
            correct=state.correct,
            points_by_kept=defaultdict(int, state.points_by_kept),
        )
        return resumed


def _holds(shape: Shape, sample_index: int, epoch: int) -> bool:
    """`shape.holds(sample_index, epoch)`, without a call into Shape's Python method."""
    size = shape.dataset_size
    return epoch < shape.epochs and (size is None or sample_index < size)


def fold_records(
    records: Iterable[SampleResult | FoldView],
    run_key: RunKey | None = None,
    as_of: AsOf | None = None,
) -> RunSummary:
    """Fold one run key's records or fold views (in any order, duplicates allowed)."""
    folded: RunFold | None = RunFold(run_key) if run_key is not None else None
    for record in records:
        if folded is None:
            folded = RunFold(record.run_key)
        elif record.run_key != folded.run_key:
            raise ValueError(f"record of {record.run_key} folded into {folded.run_key}")
        folded.offer(Contribution.of(record))
    if folded is None:
        raise ValueError("cannot fold no records without a run key")
    return folded.summary(as_of)


def _contribution(record: SampleResult | Contribution) -> Contribution:
    return record if isinstance(record, Contribution) else Contribution.of(record)
