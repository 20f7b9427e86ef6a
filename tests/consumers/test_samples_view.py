"""A run's per-sample view agrees with the fold: the same accuracy, counts and shape."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from resultlog.consumers import RunRecords, fold_records
from resultlog.consumers._samples import Comparison, RunSamples
from resultlog.schemas import SampleResult
from tests.support.records import RUN_KEY, make_record


def random_records(seed: int) -> list[SampleResult]:
    """Records of every kind: C, I, numeric scores, S, and some outside the newest shape."""
    rng = random.Random(seed)
    records = []
    for index in range(rng.randint(1, 40)):
        for epoch in range(3):
            if rng.random() < 0.15:
                continue  # not written yet
            value = rng.choice("CCCIIS")
            numeric = round(rng.random(), 3) if value != "S" and rng.random() < 0.3 else None
            records.append(
                make_record(
                    index,
                    epoch,
                    value,
                    degraded=value == "S",
                    numeric=numeric,
                    epochs=3 if epoch == 2 else rng.choice((2, 3)),  # the newest shape wins
                    created_offset_ms=rng.randint(0, 10_000),
                )
            )
    return records


@pytest.mark.parametrize("seed", range(30))
def test_the_view_s_accuracy_is_the_fold_s_to_the_bit(seed: int) -> None:
    records = random_records(seed)
    summary = fold_records(records, RUN_KEY)
    view = RunSamples.of(RUN_KEY, RunRecords(records, 0))
    accuracy = view.accuracy()
    assert accuracy.mean == summary.accuracy
    assert accuracy.n == summary.total_questions
    assert len(view.skipped) == summary.skipped_questions
    assert sum(2 * v >= 1 for v in view.values.values()) == summary.correct_answers
    in_shape = [c for c in view.cells if c.in_shape]
    assert len(in_shape) == summary.records
    assert len(view.degraded()) == summary.degraded_records
    assert len(view.cells) - len(in_shape) == summary.out_of_shape
    assert len(view.progress()) == summary.records


def test_per_epoch_accuracy_and_the_grid_s_samples() -> None:
    records = [
        make_record(0, 0, "C", epochs=2, dataset_size=3),
        make_record(0, 1, "I", epochs=2, dataset_size=3),
        make_record(1, 0, "C", epochs=2, dataset_size=3, numeric=0.25),
        make_record(1, 1, "S", epochs=2, dataset_size=3, degraded=True),
    ]
    view = RunSamples.of(RUN_KEY, RunRecords(records, 0))
    assert view.values == {"q0": Fraction(1, 2), "q1": Fraction(1, 4)}
    epochs = [(e, found.mean, found.n, skipped) for e, found, skipped in view.epoch_accuracy()]
    assert epochs == [(0, 0.625, 2, 0), (1, 0.0, 1, 1)]
    assert view.sample_rows(10) == [(0, "q0"), (1, "q1"), (2, "#2")]
    assert view.sample_count() == 3
    assert view.error_kinds() == {"model_error": 1}


def test_a_comparison_pairs_by_sample_id() -> None:
    a = RunSamples.of(RUN_KEY, RunRecords([make_record(i, 0, "CI"[i % 2]) for i in range(4)], 0))
    b = RunSamples.of(RUN_KEY, RunRecords([make_record(i, 0, "C") for i in range(1, 6)], 0))
    compared = Comparison.of(a, b)
    assert [s.sample_id for s in compared.shared] == ["q1", "q2", "q3"]
    assert compared.flips() == {"c_to_i": [], "i_to_c": ["q1", "q3"]}
    assert compared.difference.mean == pytest.approx(2 / 3)
    body = compared.as_json()
    assert (body["a"]["only_here"], body["b"]["only_here"], body["shared"]) == (1, 2, 3)
