"""Per-sample scores: metrics named `scorer:...`, folded as Inspect reduces a scorer's values.

A record carries such a metric only for an epoch its scorer scored (absent means unscored).
A sample's value is the mean of the epochs that carry it; the metric is the mean of those
values over the samples that have one: Inspect's `mean` epoch reducer, then its `accuracy`
or `mean` metric, which leave unscored samples out; `NAME:stderr` is Inspect's `stderr` of
those values (sample standard deviation over the square root of their count). Exact, as the
rest of the fold: each sample keeps its count and scaled sum; samples are totalled by count
(sums and sums of squares), so each number is computed exactly and rounded once, and adding
or removing one record's value is O(1).
"""

from __future__ import annotations

import math
from collections import defaultdict
from fractions import Fraction
from typing import Final

from resultlog.consumers._contribution import ONE

__all__ = ["SCORER_PREFIX", "STDERR_SUFFIX", "ScorerTotals"]

SCORER_PREFIX: Final = "scorer:"
"""A metric named so is a per-sample score (absent means unscored), not a record metric."""
STDERR_SUFFIX: Final = ":stderr"


class ScorerTotals:
    """One per-sample score's exact totals over a run's samples."""

    __slots__ = ("_by_sample", "_points_by_count", "_squares_by_count", "samples")

    def __init__(self) -> None:
        self._by_sample: dict[str, tuple[int, int]] = {}  # sample id -> (epochs, scaled sum)
        self._points_by_count: defaultdict[int, int] = defaultdict(int)
        self._squares_by_count: defaultdict[int, int] = defaultdict(int)  # scaled sums squared
        self.samples = 0

    @classmethod
    def of_samples(cls, by_sample: dict[str, tuple[int, int]]) -> ScorerTotals:
        """The totals holding these samples' (epochs, scaled sum), as `held` returned them."""
        totals = cls()
        for sample_id, (count, total) in by_sample.items():
            totals._by_sample[sample_id] = (count, total)
            totals._count(count, total, 1)
        return totals

    def held(self) -> dict[str, tuple[int, int]]:
        """Each scored sample's (epochs, scaled sum): all `of_samples` needs."""
        return dict(self._by_sample)

    def add(self, sample_id: str, points: int, sign: int) -> None:
        """Add (sign 1) or take away (sign -1) one epoch's scaled value of a sample."""
        count, total = self._by_sample.get(sample_id, (0, 0))
        if count:
            self._count(count, total, -1)
        count, total = count + sign, total + sign * points
        if count:
            self._by_sample[sample_id] = (count, total)
            self._count(count, total, 1)
        else:
            self._by_sample.pop(sample_id, None)

    def _count(self, count: int, total: int, sign: int) -> None:
        self.samples += sign
        _move(self._points_by_count, count, sign * total)
        _move(self._squares_by_count, count, sign * total * total)

    def _sum(self) -> Fraction:
        """The exact sum over samples of each sample's epoch mean."""
        return sum(
            (Fraction(points, count * ONE) for count, points in self._points_by_count.items()),
            Fraction(0),
        )

    def mean(self) -> float:
        """The mean over samples of each sample's epoch mean, rounded once (0.0 without any)."""
        return float(self._sum() / self.samples) if self.samples else 0.0

    def stderr(self) -> float:
        """Inspect's `stderr` of the samples' values: 0.0 under two samples, as Inspect's."""
        n = self.samples
        if n < 2:
            return 0.0
        squares = sum(
            (
                Fraction(square, count * count * ONE * ONE)
                for count, square in self._squares_by_count.items()
            ),
            Fraction(0),
        )
        total = self._sum()
        variance = (squares - total * total / n) / (n - 1)
        return math.sqrt(variance / n)


def _move(by_count: defaultdict[int, int], count: int, change: int) -> None:
    """Add `change` to one count's total, dropping it at zero (it adds nothing then)."""
    left = by_count[count] + change
    if left:
        by_count[count] = left
    else:
        del by_count[count]
