"""The runs page's statistics against hand-computed values: Inspect's stderr, paired intervals,
Wilson intervals of accuracies and McNemar's exact test of flips."""

from __future__ import annotations

import math
import random
import statistics
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from resultlog.consumers._stats import (
    Flip,
    estimate,
    flip_of,
    mcnemar_p,
    paired,
    proportion,
    wilson,
)


def fractions(*values: float) -> list[Fraction]:
    return [Fraction(v) for v in values]


def test_mean_stderr_and_interval_of_three_correct_one_incorrect() -> None:
    # mean 3/4; sample variance ((1/4)^2 * 3 + (3/4)^2) / 3 = 1/4; stderr sqrt(1/4 / 4) = 1/4
    found = estimate(fractions(1, 1, 0, 1))
    assert (found.n, found.mean, found.stderr) == (4, 0.75, 0.25)
    assert (found.low, found.high) == (0.75 - 0.49, 0.75 + 0.49)  # 1.96 * 0.25 = 0.49
    assert found.as_json() == {
        "n": 4,
        "mean": 0.75,
        "stderr": 0.25,
        "ci_low": 0.26,
        "ci_high": 1.24,
        "z": 1.96,
        "interval": "normal",
    }


def test_partial_values_of_several_epochs() -> None:
    # samples worth 1, 2/3, 1/3, 0: mean 1/2; variance (1/4 + 1/36 + 1/36 + 1/4) / 3 = 5/27
    found = estimate([Fraction(1), Fraction(2, 3), Fraction(1, 3), Fraction(0)])
    assert found.mean == 0.5
    assert found.stderr == math.sqrt(5 / 108)  # sqrt(5/27 / 4)
    assert found.stderr == pytest.approx(0.215165, abs=1e-6)


def test_fewer_than_two_values_have_no_spread_as_in_inspect() -> None:
    assert estimate([]).as_json()["n"] == 0
    assert (estimate([]).mean, estimate([]).stderr) == (0.0, 0.0)
    one = estimate(fractions(1))
    assert (one.n, one.mean, one.stderr, one.low, one.high) == (1, 1.0, 0.0, 1.0, 1.0)


def test_the_same_values_in_any_order_give_the_same_bits() -> None:
    rng = random.Random(16)
    values = [Fraction(rng.random()) for _ in range(500)]
    first = estimate(values)
    rng.shuffle(values)
    assert estimate(values) == first
    floats = [float(v) for v in values]
    assert first.mean == pytest.approx(statistics.fmean(floats), rel=1e-15)
    assert first.stderr == pytest.approx(statistics.stdev(floats) / math.sqrt(500), rel=1e-12)


def test_paired_difference_with_known_flips() -> None:
    # differences b - a: 0, -1, 1, 1 -> mean 1/4; variance (1/16 + 25/16 + 9/16 + 9/16) / 3
    # = 11/12; stderr sqrt(11/48)
    a = {"q0": Fraction(1), "q1": Fraction(1), "q2": Fraction(0), "q3": Fraction(0)}
    b = {"q0": Fraction(1), "q1": Fraction(0), "q2": Fraction(1), "q3": Fraction(1)}
    shared, difference = paired(a, b)
    assert [s.sample_id for s in shared] == ["q0", "q1", "q2", "q3"]
    assert [s.flip for s in shared] == [None, Flip.C_TO_I, Flip.I_TO_C, Flip.I_TO_C]
    assert difference.mean == 0.25
    assert difference.stderr == math.sqrt(11 / 48)
    assert difference.low == pytest.approx(0.25 - 1.96 * math.sqrt(11 / 48), abs=1e-15)
    assert difference.method == "paired"


def test_a_difference_of_several_epochs_is_clustered_by_sample() -> None:
    # Each value is a sample's mean over its 3 epochs: the CR1 clustered standard error
    # sqrt(n / (n - 1) * sum (d_i - mean)^2) / n, computed here from its definition.
    a = {f"q{i}": Fraction(i % 4, 3) for i in range(9)}
    b = {f"q{i}": Fraction((i * 2) % 4, 3) for i in range(9)}
    _, difference = paired(a, b, epochs=3)
    d = [b[k] - a[k] for k in a]
    mean = sum(d, Fraction(0)) / 9
    clustered = math.sqrt(Fraction(9, 8) * sum((x - mean) ** 2 for x in d)) / 9
    assert difference.method == "clustered"
    assert difference.stderr == pytest.approx(clustered, rel=1e-12)
    assert difference.as_json()["interval"] == "clustered"


def test_an_accuracy_interval_is_wilson_and_stays_within_zero_and_one() -> None:
    # The case: 0.875 over 8 questions had a normal interval of [0.7146, 1.0354].
    found = proportion(fractions(*[1] * 7, 0))
    assert found.method == "wilson" and found.mean == 0.875
    assert 0.0 <= found.low < found.mean < found.high <= 1.0
    # Wilson's interval from its formula, written out here for 9 of 10 (0.5958, 0.9821).
    z, n, p = 1.96, 10, 0.9
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert wilson(0.9, 10) == pytest.approx((center - half, center + half), abs=1e-15)
    assert wilson(0.9, 10) == pytest.approx((0.5958, 0.9821), abs=1e-4)
    assert proportion(fractions(1, 1, 1)).high == 1.0
    assert proportion([]).as_json()["interval"] == "wilson"


@given(st.integers(min_value=1, max_value=500), st.data())
def test_wilson_is_within_zero_and_one_and_holds_the_mean(n: int, data: st.DataObject) -> None:
    correct = data.draw(st.integers(min_value=0, max_value=n))
    low, high = wilson(correct / n, n)
    assert 0.0 <= low <= correct / n + 1e-12 and correct / n - 1e-12 <= high <= 1.0


def _exact_binomial_p(b: int, c: int) -> float:
    """Two-sided exact binomial p-value of b successes in b + c at p = 1/2, as textbooks do."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / float(2**n)
    return min(1.0, 2 * tail)


@pytest.mark.parametrize(("b", "c"), [(0, 0), (1, 0), (7, 1), (1, 7), (5, 5), (12, 30), (0, 9)])
def test_mcnemar_is_the_exact_binomial_test_of_the_discordant_pairs(b: int, c: int) -> None:
    assert mcnemar_p(b, c) == pytest.approx(_exact_binomial_p(b, c), rel=1e-12)
    assert mcnemar_p(b, c) == mcnemar_p(c, b)


def test_mcnemar_of_known_values() -> None:
    assert mcnemar_p(7, 1) == pytest.approx(0.0703125, abs=1e-12)  # 2 * 9 / 256
    assert mcnemar_p(0, 0) == 1.0 and mcnemar_p(3, 3) == 1.0


def test_only_samples_of_both_runs_are_paired() -> None:
    a = {"q0": Fraction(1), "q1": Fraction(0)}
    b = {"q1": Fraction(1), "q9": Fraction(0)}
    shared, difference = paired(a, b)
    assert [(s.sample_id, s.difference) for s in shared] == [("q1", Fraction(1))]
    assert (difference.n, difference.mean, difference.stderr) == (1, 1.0, 0.0)


@pytest.mark.parametrize(
    ("a", "b", "flip"),
    [
        (Fraction(1, 2), Fraction(0), Flip.C_TO_I),  # 0.5 counts as correct, as in the fold
        (Fraction(1, 3), Fraction(2, 3), Flip.I_TO_C),
        (Fraction(2, 3), Fraction(1), None),
        (Fraction(0), Fraction(1, 3), None),
    ],
)
def test_a_flip_is_a_change_of_correct_at_one_half(a: Fraction, b: Fraction, flip: str) -> None:
    assert flip_of(a, b) == flip
