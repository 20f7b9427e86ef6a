"""Deterministic statistics of the runs page: means with a 95% interval, paired differences.

The standard error is Inspect AI's `stderr`: the sample standard deviation (n - 1 in the
denominator) over sqrt(n), 0 for fewer than two values; the interval is the mean plus or minus
1.96 standard errors (normal approximation, not clipped to the range of the values). Sums are
exact (`Fraction`), so the figures depend only on the values, never on their order, and each
float is rounded once; the mean of per-sample values equals the fold's `accuracy` bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = ["Z_95", "Estimate", "Flip", "PairedSample", "estimate", "flip_of", "paired"]

Z_95 = Fraction(196, 100)  # the two-sided 95% quantile of the normal distribution, as Inspect


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean over n values, its standard error and 95% interval."""

    n: int
    mean: float
    stderr: float
    low: float
    high: float

    def as_json(self) -> dict[str, Any]:
        """The estimate as the JSON routes give it."""
        return {
            "n": self.n,
            "mean": self.mean,
            "stderr": self.stderr,
            "ci_low": self.low,
            "ci_high": self.high,
            "z": float(Z_95),
        }


def estimate(values: Iterable[Fraction]) -> Estimate:
    """The mean of `values` with Inspect's standard error and a 95% interval (0s for none)."""
    exact = list(values)
    n = len(exact)
    if not n:
        return Estimate(0, 0.0, 0.0, 0.0, 0.0)
    mean = sum(exact, Fraction(0)) / n
    stderr = 0.0
    if n > 1:
        variance = sum(((x - mean) ** 2 for x in exact), Fraction(0)) / (n - 1)
        stderr = math.sqrt(variance / n)  # Fraction -> float rounds once; sqrt is exact IEEE
    margin = Z_95 * Fraction(stderr)
    return Estimate(n, float(mean), stderr, float(mean - margin), float(mean + margin))


class Flip:
    """How a sample's outcome changed from run a to run b (correct: value >= 0.5, as the fold)."""

    C_TO_I = "c_to_i"
    I_TO_C = "i_to_c"


def flip_of(a: Fraction, b: Fraction) -> str | None:
    """`Flip.C_TO_I`, `Flip.I_TO_C`, or None when both runs agree on correct or not."""
    correct_a, correct_b = 2 * a >= 1, 2 * b >= 1
    if correct_a == correct_b:
        return None
    return Flip.C_TO_I if correct_a else Flip.I_TO_C


@dataclass(frozen=True, slots=True)
class PairedSample:
    """One sample both runs answered: its values and b - a."""

    sample_id: str
    a: Fraction
    b: Fraction

    @property
    def difference(self) -> Fraction:
        """b - a."""
        return self.b - self.a

    @property
    def flip(self) -> str | None:
        """The sample's flip from a to b, if any."""
        return flip_of(self.a, self.b)


def paired(
    a: Mapping[str, Fraction], b: Mapping[str, Fraction]
) -> tuple[list[PairedSample], Estimate]:
    """The samples of both runs (in a's order) and the mean of b - a with its paired interval."""
    shared = [PairedSample(key, value, b[key]) for key, value in a.items() if key in b]
    return shared, estimate(sample.difference for sample in shared)
