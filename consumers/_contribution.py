"""What one record adds to its run's summary, compact enough to hold one per key in memory.

A contribution holds its numbers (tokens, cost, spent, generation time, created_at) as its own
attributes, which the compiled path stores unboxed, and three references: its interned key
`(sample_index, epoch)`, its interned sample id and its verdict (value, numeric, degraded,
metrics and shape, as one interned tuple). Records of a run mostly share a verdict, and the runs
of one benchmark share key tuples and sample ids. Interning never changes a value, only which
equal object holds it; the pools are bounded, so a long-lived aggregator never grows them
without limit (a full pool starts again, which only stops some sharing).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Final, Generic, NamedTuple, TypeVar

from resultlog.schemas import FoldPrefix, FoldView, SampleResult, ScoreValue

__all__ = [
    "ONE",
    "Contribution",
    "Key",
    "Memo",
    "Pool",
    "Shape",
    "Tokens",
    "Verdict",
    "scaled",
    "shape_of",
    "verdict_of",
]

_EXP = 1074
ONE: Final = 1 << _EXP  # 1.0 as an exact scaled integer
_POOL_SIZE = 1 << 16

_T = TypeVar("_T")
_K = TypeVar("_K")


_SCALED_CACHE = 1 << 14  # entries of about 200 bytes: a few MB at most
_scaled: dict[float, int] = {}


def scaled(value: float) -> int:
    """`value * 2**1074`, exactly: every finite double is a multiple of 2**-1074."""
    # Cached: a fold scales the same few values (costs, metrics, scores) again and again.
    # Equal floats (0.0 and -0.0 too) have equal scaled values, so the cache changes no sum.
    known = _scaled.get(value)
    if known is None:
        if len(_scaled) >= _SCALED_CACHE:
            _scaled.clear()
        numerator, denominator = value.as_integer_ratio()
        known = _scaled[value] = numerator << (_EXP + 1 - denominator.bit_length())
    return known


class Pool(Generic[_T]):
    """Interning of equal immutable values, bounded: one shared object per distinct value."""

    __slots__ = ("_items", "_limit")

    def __init__(self, limit: int = _POOL_SIZE) -> None:
        self._items: dict[_T, _T] = {}
        self._limit = limit

    def intern(self, value: _T) -> _T:
        """The pool's object equal to `value` (`value` itself the first time)."""
        # A method, not __call__: compiled callers call a method directly, a call through
        # the object's __call__ goes through the generic call protocol.
        items = self._items
        if len(items) >= self._limit:
            items.clear()
        return items.setdefault(value, value)


class Memo(Generic[_K, _T]):
    """One object per distinct key, built from the key the first time (bounded like Pool):
    finding a NamedTuple or small object costs less than building it again."""

    __slots__ = ("_build", "_items", "_limit")

    def __init__(self, build: Callable[[_K], _T], limit: int = _POOL_SIZE) -> None:
        self._build = build
        self._items: dict[_K, _T] = {}
        self._limit = limit

    def of(self, key: _K) -> _T:
        """The object of `key` (a method, not __call__: see Pool.intern)."""
        item = self._items.get(key)
        if item is None:
            if len(self._items) >= self._limit:
                self._items.clear()
            item = self._items[key] = self._build(key)
        return item


class Tokens(NamedTuple):
    """Token counts of one record."""

    input: int = 0
    output: int = 0
    total: int = 0
    reasoning: int = 0


class Shape(NamedTuple):
    """A run's shape: which (sample_index, epoch) belong to it, and how many are expected."""

    epochs: int
    dataset_size: int | None
    selected: int | None = None  # the samples the writer's selection ran, when it said

    def holds(self, sample_index: int, epoch: int) -> bool:
        """Whether a key lies inside this shape."""
        size = self.dataset_size
        return epoch < self.epochs and (size is None or sample_index < size)

    @property
    def expected(self) -> int | None:
        """The (sample, epoch) pairs the run asks for: its selection's, else the dataset's."""
        samples = self.dataset_size if self.selected is None else self.selected
        return None if samples is None else samples * self.epochs


_NO_TOKENS: Final = (0, 0, 0, 0)
_SCORE_VALUES: Final = {value.value: value for value in ScoreValue}
_Metrics = tuple[tuple[str, float], ...]
# A record's (sample_index, epoch), typed as a tuple of any length: compiled code holds a
# fixed-length tuple unpacked in place, and would build a new one for every dict it enters.
Key = tuple[int, ...]
_Values = tuple[ScoreValue, float | None, bool, _Metrics, Shape]
_keys: Pool[Key] = Pool()
_metrics: Pool[_Metrics] = Pool()


class Verdict:
    """What records of a run mostly share: value, numeric, degraded, metrics and shape."""

    __slots__ = ("degraded", "metrics", "numeric", "points", "shape", "value", "values")

    def __init__(self, values: _Values) -> None:
        self.value, self.numeric, self.degraded, self.metrics, self.shape = values
        self.values: tuple[object, ...] = values  # one object: what equality compares
        self.points = _points(self.value, self.numeric)  # once per verdict, not per record


def _points(value: ScoreValue, numeric: float | None) -> int | None:
    """An epoch's value, scaled: `numeric` when set, else C=1, I=0; None for S."""
    if value is ScoreValue.S:
        return None
    if numeric is not None:
        return scaled(numeric)
    return ONE if value is ScoreValue.C else 0


_verdicts: Memo[_Values, Verdict] = Memo(Verdict)


class _Last:
    """The verdict made last: a record mostly has its predecessor's (same run)."""

    __slots__ = ("verdict",)

    def __init__(self) -> None:
        self.verdict: Verdict | None = None


_last = _Last()


def verdict_of(
    value: ScoreValue, numeric: float | None, degraded: bool, metrics: _Metrics, shape: Shape
) -> Verdict:
    """The interned verdict of these values: the last one's when they equal its values (as
    a tuple compares them, so the pool's answer too), else the pool's."""
    last = _last.verdict
    if (
        last is not None
        and last.metrics is metrics  # the readers hand out one tuple per metrics' bytes
        and last.shape is shape
        and last.value is value
        and last.degraded is degraded
        and last.numeric == numeric
    ):
        return last
    verdict = _last.verdict = _verdicts.of(
        (value, numeric, degraded, _metrics.intern(metrics), shape)
    )
    return verdict


_shapes: Memo[tuple[int, int | None, int | None], Shape] = Memo(lambda values: Shape(*values))


def shape_of(epochs: int, dataset_size: int | None, selected: int | None) -> Shape:
    """The one Shape object of these values."""
    return _shapes.of((epochs, dataset_size, selected))


class Contribution:
    """What one record adds to its run's summary; small enough to keep one per key.

    Immutable; equal when every field in `FIELDS` is equal. Numbers are attributes of their
    own (compiled, they are stored unboxed); what records of a run share (the verdict: value,
    numeric, degraded, metrics, shape) is one interned object (`verdict_of`), and the key
    tuple and sample id are interned too.
    """

    __slots__ = (
        "_verdict",
        "cost",
        "created_at_ms",
        "generation_time_ms",
        "input_tokens",
        "key",
        "output_tokens",
        "reasoning_tokens",
        "sample_id",
        "spent",
        "total_tokens",
    )
    FIELDS: Final = (
        "sample_id",
        "sample_index",
        "epoch",
        "value",
        "numeric",
        "degraded",
        "metrics",
        "tokens",
        "cost",
        "spent",
        "generation_time_ms",
        "shape",
        "created_at_ms",
    )

    key: Key
    sample_id: str
    created_at_ms: int
    _verdict: Verdict
    input_tokens: int
    output_tokens: int
    total_tokens: int
    reasoning_tokens: int
    cost: float
    spent: float
    generation_time_ms: int

    def __init__(  # noqa: PLR0917 - positional: built once per record, compiled
        self,
        sample_id: str,
        key: Key,
        verdict: Verdict,
        tokens: tuple[int, int, int, int],
        cost: float,
        spent: float,
        generation_time_ms: int,
        created_at_ms: int,
    ) -> None:
        self.key = _keys.intern(key)
        self.sample_id = sys.intern(sample_id)
        self.created_at_ms = created_at_ms
        self._verdict = verdict
        self.input_tokens, self.output_tokens, self.total_tokens, self.reasoning_tokens = tokens
        self.cost = cost
        self.spent = spent
        self.generation_time_ms = generation_time_ms

    @classmethod
    def of(cls, record: SampleResult | FoldView) -> Contribution:
        """The contribution of one record, whole or its fold view (both give equal ones)."""
        usage, score = record.usage, record.score
        tokens = _NO_TOKENS
        if usage is not None:
            tokens = (
                usage.input_tokens,
                usage.output_tokens,
                usage.total_tokens,
                usage.reasoning_tokens,
            )
        metrics = tuple(sorted(score.metrics.items()))
        shape = shape_of(record.epochs, record.dataset_size, record.selected_samples)
        verdict = verdict_of(score.value, score.numeric, record.degraded, metrics, shape)
        return Contribution(
            record.sample_id,
            (record.sample_index, record.epoch),
            verdict,
            tokens,
            record.kept_cost,
            record.spent,
            record.generation_time_ms or 0,
            record.created_at_ms,
        )

    @classmethod
    def of_prefix(cls, prefix: FoldPrefix) -> Contribution:
        """The contribution of a record's acceptable fold prefix (equal to `of` its FoldView)."""
        tokens, cost = _NO_TOKENS, 0.0
        if prefix.has_usage:
            tokens = (
                prefix.input_tokens,
                prefix.output_tokens,
                prefix.total_tokens,
                prefix.reasoning_tokens,
            )
            cost = prefix.total_cost
        spent = prefix.spent_cost
        value, metrics = _SCORE_VALUES[prefix.value], prefix.metrics.sorted
        shape = shape_of(prefix.epochs, prefix.dataset_size, prefix.selected_samples)
        verdict = verdict_of(value, prefix.numeric, prefix.degraded, metrics, shape)
        return Contribution(
            prefix.sample_id,
            (prefix.sample_index, prefix.epoch),
            verdict,
            tokens,
            cost,
            cost if spent is None else spent,
            prefix.generation_time_ms or 0,
            prefix.created_at_ms,
        )

    @property
    def sample_index(self) -> int:
        """The record's sample index."""
        return self.key[0]

    @property
    def epoch(self) -> int:
        """The record's epoch."""
        return self.key[1]

    @property
    def verdict(self) -> Verdict:
        """What records of a run mostly share, as one interned object: a key by identity
        for what is derived per verdict (equal verdicts are mostly, not always, one object)."""
        return self._verdict

    @property
    def value(self) -> ScoreValue:
        """The score's value."""
        return self._verdict.value

    @property
    def numeric(self) -> float | None:
        """The score's numeric value, if the harness gave one."""
        return self._verdict.numeric

    @property
    def degraded(self) -> bool:
        """Whether the record was synthesized from an error."""
        return self._verdict.degraded

    @property
    def metrics(self) -> _Metrics:
        """The score's metrics, sorted by name."""
        return self._verdict.metrics

    @property
    def shape(self) -> Shape:
        """The run's shape as the record states it."""
        return self._verdict.shape

    @property
    def tokens(self) -> Tokens:
        """The record's token counts (zeros without usage)."""
        return Tokens(
            self.input_tokens, self.output_tokens, self.total_tokens, self.reasoning_tokens
        )

    @property
    def points(self) -> int | None:
        """The epoch's value, scaled: `numeric` when set, else C=1, I=0; None for S."""
        return self._verdict.points

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Contribution):
            return NotImplemented
        return self._state() == other._state()

    def __hash__(self) -> int:
        return hash(self._state())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"Contribution({fields})"

    def _state(self) -> tuple[object, ...]:
        return (
            self.key,
            self.sample_id,
            self.created_at_ms,
            self._verdict.values,
            self.input_tokens,
            self.output_tokens,
            self.total_tokens,
            self.reasoning_tokens,
            self.cost,
            self.spent,
            self.generation_time_ms,
        )

    def newness(self) -> tuple[int, int, int]:
        """Order of records by age for the run's shape: created_at, then key."""
        return (self.created_at_ms, self.key[0], self.key[1])

    def precedence(self) -> tuple[int, bool, tuple[object, ...]]:
        """Order among two different records of one key seen without offsets: newest wins."""
        return (self.created_at_ms, not self.degraded, _stable(self))


def _stable(item: Contribution) -> tuple[object, ...]:
    """A total order on contributions, so ties between equal timestamps still resolve."""
    return (
        item.value.value,
        item.numeric or 0.0,
        item.metrics,
        item.tokens,
        item.cost,
        item.spent,
        item.generation_time_ms,
        item.shape.epochs,
        item.shape.dataset_size or 0,
        item.shape.selected or 0,
    )
