"""The fold: one run key's latest records into a RunSummary, with exact arithmetic.

The worker, the aggregator and replay all call this module, so their summaries agree bit for
bit. Nothing here sums floats in arrival order: counts are integers, per-sample values are
`Fraction`s and float totals go through `math.fsum`, so the result depends only on the set of
latest records, never on their order, duplicates or restarts.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from resultlog.schemas import AsOf, RunKey, RunSummary, SampleResult, ScoreValue, SummaryUsage

__all__ = ["Contribution", "RunFold", "fold"]

RecordKey = tuple[int, int]  # (sample_index, epoch)
_HALF = Fraction(1, 2)


class Tokens(NamedTuple):
    """One record's token counts."""

    input: int
    output: int
    total: int
    reasoning: int


_NO_TOKENS = Tokens(0, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class Contribution:
    """What one record adds to its run's summary; small enough to keep one per key."""

    sample_id: str
    value: ScoreValue
    degraded: bool
    metrics: tuple[tuple[str, float], ...]
    tokens: Tokens
    total_cost: float
    generation_time_ms: int
    expected_records: int | None
    created_at_ms: int

    @classmethod
    def of(cls, record: SampleResult) -> Contribution:
        """The contribution of one record."""
        usage = record.usage
        tokens = _NO_TOKENS
        if usage is not None:
            tokens = Tokens(
                usage.input_tokens,
                usage.output_tokens,
                usage.total_tokens,
                usage.reasoning_tokens,
            )
        expected = None
        if record.dataset_size is not None:
            expected = record.dataset_size * record.epochs
        return cls(
            sample_id=record.sample_id,
            value=record.score.value,
            degraded=record.degraded,
            metrics=tuple(sorted(record.score.metrics.items())),
            tokens=tokens,
            total_cost=usage.total_cost if usage is not None else 0.0,
            generation_time_ms=record.generation_time_ms or 0,
            expected_records=expected,
            created_at_ms=int(record.created_at.timestamp() * 1000),
        )

    def precedence(self) -> tuple[int, bool, tuple[object, ...]]:
        """Order among two different records of one key seen without offsets: newest wins."""
        return (self.created_at_ms, not self.degraded, _stable(self))


class RunFold:
    """The latest contribution per (sample_index, epoch) of one run key."""

    def __init__(self, run_key: RunKey) -> None:
        self.run_key = run_key
        self._latest: dict[RecordKey, Contribution] = {}

    def __len__(self) -> int:
        return len(self._latest)

    def apply(self, record: SampleResult) -> None:
        """Take a record read in log order: it replaces whatever its key held."""
        self._latest[(record.sample_index, record.epoch)] = Contribution.of(record)

    def offer(self, record: SampleResult) -> None:
        """Take a record seen out of log order: it replaces its key's only if it is newer."""
        key = (record.sample_index, record.epoch)
        new = Contribution.of(record)
        old = self._latest.get(key)
        if old is None or new.precedence() > old.precedence():
            self._latest[key] = new

    def remove(self, sample_index: int, epoch: int) -> None:
        """Forget a key (its tombstone was read)."""
        self._latest.pop((sample_index, epoch), None)

    def summary(self, as_of: AsOf | None = None) -> RunSummary:
        """The RunSummary of the latest contributions."""
        return _summarize(self.run_key, self._latest.values(), as_of)


def fold(
    records: Iterable[SampleResult], run_key: RunKey | None = None, as_of: AsOf | None = None
) -> RunSummary:
    """Fold one run key's records (in any order, duplicates allowed) into its summary."""
    folded: RunFold | None = RunFold(run_key) if run_key is not None else None
    for record in records:
        if folded is None:
            folded = RunFold(record.run_key)
        elif record.run_key != folded.run_key:
            raise ValueError(f"record of {record.run_key} folded into {folded.run_key}")
        folded.offer(record)
    if folded is None:
        raise ValueError("cannot fold no records without a run key")
    return folded.summary(as_of)


def _summarize(
    run_key: RunKey, contributions: Iterable[Contribution], as_of: AsOf | None
) -> RunSummary:
    items = list(contributions)
    per_sample: dict[str, list[ScoreValue]] = defaultdict(list)
    for item in items:
        per_sample[item.sample_id].append(item.value)
    values = [_sample_value(epochs) for epochs in per_sample.values()]
    answered = [value for value in values if value is not None]
    accuracy = sum(answered, Fraction(0)) / len(answered) if answered else Fraction(0)
    expected = [item.expected_records for item in items if item.expected_records is not None]
    return RunSummary(
        run_id=run_key.run_id,
        benchmark_id=run_key.benchmark_id,
        model=run_key.model,
        records=len(items),
        expected_records=max(expected) if expected else None,
        degraded_records=sum(item.degraded for item in items),
        total_questions=len(answered),
        correct_answers=sum(value >= _HALF for value in answered),
        skipped_questions=len(values) - len(answered),
        accuracy=float(accuracy),
        metrics=_metric_means(items),
        usage=_usage(items),
        generation_time_ms=sum(item.generation_time_ms for item in items),
        as_of=as_of,
    )


def _sample_value(epochs: list[ScoreValue]) -> Fraction | None:
    """Mean over the sample's non-S epochs (C=1, I=0); None when every epoch is S."""
    kept = [value for value in epochs if value is not ScoreValue.S]
    if not kept:
        return None
    return Fraction(sum(value is ScoreValue.C for value in kept), len(kept))


def _metric_means(items: list[Contribution]) -> dict[str, float]:
    samples: dict[str, list[float]] = defaultdict(list)
    for item in items:
        if item.value is not ScoreValue.S:
            for name, value in item.metrics:
                samples[name].append(value)
    # fsum is correctly rounded, hence independent of the order of its inputs.
    return {name: math.fsum(values) / len(values) for name, values in sorted(samples.items())}


def _usage(items: list[Contribution]) -> SummaryUsage:
    return SummaryUsage(
        input_tokens=sum(item.tokens.input for item in items),
        output_tokens=sum(item.tokens.output for item in items),
        total_tokens=sum(item.tokens.total for item in items),
        reasoning_tokens=sum(item.tokens.reasoning for item in items),
        total_cost=math.fsum(item.total_cost for item in items),
    )


def _stable(item: Contribution) -> tuple[object, ...]:
    """A total order on contributions, so ties between equal timestamps still resolve."""
    return (item.value.value, item.metrics, item.tokens, item.total_cost, item.generation_time_ms)
