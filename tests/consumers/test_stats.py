"""The runs page's statistics against hand-computed values: Inspect's stderr, paired intervals."""

from __future__ import annotations

import math
import random
import statistics
from fractions import Fraction

import pytest

from resultlog.consumers.aggregator.web._stats import Flip, estimate, flip_of, paired


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
