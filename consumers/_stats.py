"""Deterministic statistics of runs: means with a 95% interval, paired differences, McNemar.

The standard error is Inspect AI's `stderr`: the sample standard deviation (n - 1 in the
denominator) over sqrt(n), 0 for fewer than two values. An accuracy (a proportion, in [0, 1])
gets the Wilson score interval, which stays in [0, 1]; a paired difference gets the mean plus
or minus 1.96 standard errors (normal). With several epochs the difference's standard error
is clustered by sample (CR1: each sample's epochs are one cluster), which is the stderr of the
per-sample differences. McNemar's exact test gives the p-value of the flips. Sums are exact
(`Fraction`), so the figures depend only on the values, never on their order, and each float
is rounded once; the mean of per-sample values equals the fold's `accuracy` bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

__all__ = [
    "Z_95",
    "Estimate",
    "Flip",
    "PairedSample",
    "estimate",
    "flip_of",
    "mcnemar_p",
    "paired",
    "proportion",
]

Z_95 = Fraction(196, 100)  # the two-sided 95% quantile of the normal distribution, as Inspect


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean over n values, its standard error and 95% interval."""

    n: int
    mean: float
    stderr: float
    low: float
    high: float
    method: str = "normal"  # the interval: "normal", "wilson", or "clustered" (by sample)

    def as_json(self) -> dict[str, Any]:
        """The estimate as the JSON routes give it."""
        return {
            "n": self.n,
            "mean": self.mean,
            "stderr": self.stderr,
            "ci_low": self.low,
            "ci_high": self.high,
            "z": float(Z_95),
            "interval": self.method,
        }


def estimate(values: Iterable[Fraction], method: str = "normal") -> Estimate:
    """The mean of `values` with Inspect's standard error and a 95% normal interval (0s for
    none); `method` names it ("clustered": each value is one sample's, over its epochs)."""
    exact = list(values)
    n = len(exact)
    if not n:
        return Estimate(0, 0.0, 0.0, 0.0, 0.0, method)
    mean = sum(exact, Fraction(0)) / n
    stderr = 0.0
    if n > 1:
        variance = sum(((x - mean) ** 2 for x in exact), Fraction(0)) / (n - 1)
        stderr = math.sqrt(variance / n)  # Fraction -> float rounds once; sqrt is exact IEEE
    margin = Z_95 * Fraction(stderr)
    return Estimate(n, float(mean), stderr, float(mean - margin), float(mean + margin), method)


def proportion(values: Iterable[Fraction]) -> Estimate:
    """The mean of values in [0, 1] (an accuracy) with Inspect's standard error and the 95%
    Wilson score interval over its n samples, which stays in [0, 1]."""
    found = estimate(values)
    if not found.n:
        return Estimate(0, 0.0, 0.0, 0.0, 0.0, "wilson")
    low, high = wilson(found.mean, found.n)
    return Estimate(found.n, found.mean, found.stderr, low, high, "wilson")


def wilson(p: float, n: int, z: float = float(Z_95)) -> tuple[float, float]:
    """The Wilson score interval of a proportion p over n trials."""
    z2n = z * z / n
    center = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(max(p * (1 - p), 0.0) / n + z2n / (4 * n))
    return max(0.0, center - half), min(1.0, center + half)


def mcnemar_p(c_to_i: int, i_to_c: int) -> float:
    """McNemar's exact test: the two-sided binomial p-value (p = 1/2) of the discordant pairs
    (1.0 without any)."""
    n = c_to_i + i_to_c
    tail = sum(math.comb(n, k) for k in range(min(c_to_i, i_to_c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


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
    a: Mapping[str, Fraction], b: Mapping[str, Fraction], *, epochs: int = 1
) -> tuple[list[PairedSample], Estimate]:
    """The samples of both runs (in a's order) and the mean of b - a with its paired interval;
    with several `epochs`, its standard error is clustered by sample (the values are each
    sample's mean over its epochs, so the per-sample stderr is the CR1 clustered one)."""
    shared = [PairedSample(key, value, b[key]) for key, value in a.items() if key in b]
    method = "clustered" if epochs > 1 else "paired"
    return shared, estimate((sample.difference for sample in shared), method)
