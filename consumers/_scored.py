"""Per-sample scores: metrics named `scorer:...`, folded as Inspect reduces a scorer's values.

A record carries such a metric only for an epoch its scorer scored (absent means unscored).
A sample's value is the mean of the epochs that carry it; the metric is the mean of those
values over the samples that have one: Inspect's `mean` epoch reducer, then its `accuracy`
or `mean` metric, which leave unscored samples out. Exact, as the rest of the fold: each
sample keeps its count and scaled sum; samples are totalled by count, so the mean is rounded
once and adding or removing one record's value is O(1).
"""

from __future__ import annotations

from collections import defaultdict
from math import lcm
from typing import Final

from resultlog.consumers._contribution import ONE

__all__ = ["SCORER_PREFIX", "ScorerTotals", "is_scorer_metric"]

SCORER_PREFIX: Final = "scorer:"


def is_scorer_metric(name: str) -> bool:
    """Whether a metric is a per-sample score (absent means unscored), not a record metric."""
    return name.startswith(SCORER_PREFIX)


class ScorerTotals:
    """One per-sample score's exact totals over a run's samples."""

    __slots__ = ("_by_sample", "_points_by_count", "samples")

    def __init__(self) -> None:
        self._by_sample: dict[str, tuple[int, int]] = {}  # sample id -> (epochs, scaled sum)
        self._points_by_count: defaultdict[int, int] = defaultdict(int)
        self.samples = 0

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
        by_count = self._points_by_count
        left = by_count[count] + sign * total
        if left:
            by_count[count] = left
        else:
            del by_count[count]

    def mean(self) -> float:
        """The mean over samples of each sample's epoch mean, rounded once (0.0 without any)."""
        if not self.samples:
            return 0.0
        by_count = self._points_by_count
        common = lcm(*by_count) if by_count else 1
        numerator = sum(points * (common // count) for count, points in by_count.items())
        return numerator / (common * self.samples * ONE)
