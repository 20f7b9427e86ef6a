"""What one record adds to its run's summary, compact enough to hold one per key in memory.

A contribution keeps four references: its interned key `(sample_index, epoch)`, its interned
sample id, its created_at and its outcome (every other field, as one interned tuple). Records
with equal outcomes, the common case within a run, share one outcome object, and the runs of
one benchmark share key tuples and sample ids. Interning never changes a value, only which
equal object holds it; the pools are bounded, so a long-lived aggregator never grows them
without limit (a full pool starts again, which only stops some sharing).
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from typing import Final, Generic, NamedTuple, TypeVar

from resultlog.schemas import FoldFields, FoldView, SampleResult, ScoreValue

__all__ = ["ONE", "Contribution", "Pool", "Shape", "Tokens", "scaled"]

_EXP = 1074
ONE: Final = 1 << _EXP  # 1.0 as an exact scaled integer
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
_POOL_SIZE = 1 << 16

_T = TypeVar("_T")


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

    def __call__(self, value: _T) -> _T:
        """The pool's object equal to `value` (`value` itself the first time)."""
        items = self._items
        if len(items) >= self._limit:
            items.clear()
        return items.setdefault(value, value)


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


_NO_TOKENS = Tokens()
_SCORE_VALUES: Final = {value.value: value for value in ScoreValue}
_Metrics = tuple[tuple[str, float], ...]
# value, numeric, degraded, metrics, tokens, cost, spent, generation_time_ms, shape
_Outcome = tuple[ScoreValue, float | None, bool, _Metrics, Tokens, float, float, int, Shape]
_keys: Pool[tuple[int, int]] = Pool()
_outcomes: Pool[_Outcome] = Pool()
_metrics: Pool[_Metrics] = Pool()
_tokens: Pool[Tokens] = Pool()
_shapes: Pool[Shape] = Pool()


class Contribution:
    """What one record adds to its run's summary; small enough to keep one per key.

    Immutable; equal when every field is equal. `FIELDS` names the fields in the order
    the constructor takes them.
    """

    __slots__ = ("_outcome", "created_at_ms", "key", "sample_id")
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

    key: tuple[int, int]
    sample_id: str
    created_at_ms: int
    _outcome: _Outcome

    def __init__(  # noqa: PLR0917 - the fields in the order the dataclass took them
        self,
        sample_id: str,
        sample_index: int,
        epoch: int,
        value: ScoreValue,
        numeric: float | None,
        degraded: bool,
        metrics: _Metrics,
        tokens: Tokens,
        cost: float,
        spent: float,
        generation_time_ms: int,
        shape: Shape,
        created_at_ms: int,
    ) -> None:
        self.key = _keys((sample_index, epoch))
        self.sample_id = sys.intern(sample_id)
        self.created_at_ms = created_at_ms
        self._outcome = _outcomes(
            (
                value,
                numeric,
                degraded,
                _metrics(metrics),
                _tokens(tokens),
                cost,
                spent,
                generation_time_ms,
                _shapes(shape),
            )
        )

    @classmethod
    def of(cls, record: SampleResult | FoldView) -> Contribution:
        """The contribution of one record, whole or its fold view (both give equal ones)."""
        usage, score = record.usage, record.score
        tokens = _NO_TOKENS
        if usage is not None:
            tokens = Tokens(
                usage.input_tokens, usage.output_tokens, usage.total_tokens, usage.reasoning_tokens
            )
        return cls(
            record.sample_id,
            record.sample_index,
            record.epoch,
            score.value,
            score.numeric,
            record.degraded,
            tuple(sorted(score.metrics.items())),
            tokens,
            record.kept_cost,
            record.spent,
            record.generation_time_ms or 0,
            Shape(record.epochs, record.dataset_size, record.selected_samples),
            record.created_at_ms
            if isinstance(record, FoldView)
            else (record.created_at - _EPOCH) // _MILLISECOND,
        )

    @classmethod
    def of_fields(cls, fields: FoldFields) -> Contribution:
        """The contribution of a record's fold fields (equal to `of` its FoldView)."""
        usage, score = fields["usage"], fields["score"]
        tokens, cost = _NO_TOKENS, 0.0
        if usage is not None:
            tokens = Tokens(
                usage["input_tokens"],
                usage["output_tokens"],
                usage["total_tokens"],
                usage["reasoning_tokens"],
            )
            cost = usage["total_cost"]
        spent = fields["spent_cost"]
        metrics = score["metrics"]
        return cls(
            fields["sample_id"],
            fields["sample_index"],
            fields["epoch"],
            _SCORE_VALUES[score["value"]],
            score["numeric"],
            fields["status"] == "degraded",
            tuple(sorted(metrics.items())) if metrics else (),
            tokens,
            cost,
            cost if spent is None else spent,
            fields["generation_time_ms"] or 0,
            Shape(fields["epochs"], fields["dataset_size"], fields["selected_samples"]),
            fields["created_at_ms"],
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
    def value(self) -> ScoreValue:
        """The score's value."""
        return self._outcome[0]

    @property
    def numeric(self) -> float | None:
        """The score's numeric value, if the harness gave one."""
        return self._outcome[1]

    @property
    def degraded(self) -> bool:
        """Whether the record was synthesized from an error."""
        return self._outcome[2]

    @property
    def metrics(self) -> _Metrics:
        """The score's metrics, sorted by name."""
        return self._outcome[3]

    @property
    def tokens(self) -> Tokens:
        """The record's token counts (zeros without usage)."""
        return self._outcome[4]

    @property
    def cost(self) -> float:
        """The cost of the attempt the record keeps."""
        return self._outcome[5]

    @property
    def spent(self) -> float:
        """What the key has cost so far."""
        return self._outcome[6]

    @property
    def generation_time_ms(self) -> int:
        """Milliseconds spent generating (0 when unknown)."""
        return self._outcome[7]

    @property
    def shape(self) -> Shape:
        """The run's shape as the record states it."""
        return self._outcome[8]

    @property
    def points(self) -> int | None:
        """The epoch's value, scaled: `numeric` when set, else C=1, I=0; None for S."""
        value, numeric = self._outcome[0], self._outcome[1]
        if value is ScoreValue.S:
            return None
        if numeric is not None:
            return scaled(numeric)
        return ONE if value is ScoreValue.C else 0

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
        return (self.key, self.sample_id, self.created_at_ms, self._outcome)

    def newness(self) -> tuple[int, int, int]:
        """Order of records by age for the run's shape: created_at, then key."""
        return (self.created_at_ms, *self.key)

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
