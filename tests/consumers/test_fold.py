"""The fold: the original aggregate's cases and order/duplicate independence."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from resultlog.consumers import RunFold, fold
from tests.factories import RUN_KEY, make_record


def test_all_epochs_skipped_counts_a_skipped_question() -> None:
    summary = fold(
        [make_record(0, e, "S", degraded=True) for e in range(3)]
        + [make_record(1, e, "C") for e in range(3)]
    )
    assert summary.skipped_questions == 1
    assert summary.total_questions == 1
    assert summary.correct_answers == 1
    assert summary.accuracy == 1.0
    assert summary.records == 6
    assert summary.degraded_records == 3


def test_partial_skipped_epochs_average_over_the_rest() -> None:
    records = [
        make_record(0, 0, "C"),
        make_record(0, 1, "S", degraded=True),
        make_record(0, 2, "I"),
    ]
    summary = fold(records)
    assert summary.total_questions == 1
    assert summary.skipped_questions == 0
    assert summary.accuracy == 0.5  # (1 + 0) / 2: the S epoch is dropped
    assert summary.correct_answers == 1  # a value of exactly 0.5 counts as correct


def test_accuracy_is_the_mean_of_per_sample_values() -> None:
    records = [
        *(make_record(0, e, "C") for e in range(3)),  # 1
        make_record(1, 0, "C"),
        make_record(1, 1, "I"),
        make_record(1, 2, "I"),  # 1/3
        *(make_record(2, e, "I") for e in range(3)),  # 0
    ]
    summary = fold(records)
    assert summary.accuracy == 4 / 9  # exact: Fraction(4, 9) rounded once
    assert summary.correct_answers == 1
    assert summary.total_questions == 3


def test_usage_and_generation_time_are_summed_over_all_records() -> None:
    records = [
        make_record(0, 0, tokens=10, cost=0.1, generation_time_ms=5),
        make_record(0, 1, tokens=20, cost=0.2, generation_time_ms=7),
        make_record(1, 0, "S", degraded=True),
    ]
    summary = fold(records)
    assert summary.usage.input_tokens == 30
    assert summary.usage.output_tokens == 15
    assert summary.usage.total_tokens == 45
    assert summary.usage.reasoning_tokens == 2
    assert summary.usage.total_cost == math.fsum([0.1, 0.2])
    assert summary.generation_time_ms == 12


def test_metric_means_exclude_skipped_records() -> None:
    records = [
        make_record(0, 0, "C", metrics={"reward": 1.0}),
        make_record(0, 1, "I", metrics={"reward": 0.0}),
        make_record(1, 0, "S", degraded=True, metrics={"reward": 99.0}),
        make_record(1, 1, "C", metrics={"reward": 0.5, "abs_error": 2.0}),
    ]
    summary = fold(records)
    assert summary.metrics == {"abs_error": 2.0, "reward": 0.5}


def test_expected_records_and_empty_run() -> None:
    assert fold([make_record(0, 0, epochs=2, dataset_size=7)]).expected_records == 14
    empty = RunFold(RUN_KEY).summary()
    assert (empty.records, empty.accuracy, empty.total_questions) == (0, 0.0, 0)


def test_log_order_replacement_moves_the_summary() -> None:
    folded = RunFold(RUN_KEY)
    folded.apply(make_record(0, 0, "S", degraded=True))
    assert folded.summary().skipped_questions == 1
    folded.apply(make_record(0, 0, "C"))
    after = folded.summary()
    assert (after.skipped_questions, after.correct_answers, after.degraded_records) == (0, 1, 0)
    folded.remove(0, 0)
    assert folded.summary().records == 0


def test_out_of_order_offer_keeps_the_newest_record() -> None:
    degraded = make_record(0, 0, "S", degraded=True, created_offset_ms=1)
    completed = make_record(0, 0, "C", created_offset_ms=2)
    assert fold([completed, degraded]) == fold([degraded, completed])
    assert fold([completed, degraded]).correct_answers == 1


_records = st.builds(
    make_record,
    sample_index=st.integers(0, 9),
    epoch=st.integers(0, 2),
    value=st.sampled_from(["C", "I", "S"]),
    metrics=st.dictionaries(
        st.sampled_from(["reward", "abs_error"]), st.floats(-1e6, 1e6, allow_nan=False), max_size=2
    ),
    tokens=st.integers(0, 10_000),
    cost=st.floats(0, 10, allow_nan=False),
    generation_time_ms=st.integers(0, 100_000),
)


def _latest_per_key(records: list) -> list:  # type: ignore[type-arg]
    latest = {}
    for record in records:
        latest[(record.sample_index, record.epoch)] = record
    return list(latest.values())


@settings(max_examples=200, deadline=None)
@given(st.lists(_records, min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_summary_is_identical_under_permutation_and_duplication(records, rnd) -> None:  # type: ignore[no-untyped-def]
    latest = _latest_per_key(records)
    reference = fold(latest)
    shuffled = latest * 2 + rnd.sample(latest, k=len(latest))
    rnd.shuffle(shuffled)
    assert fold(shuffled) == reference
    assert fold(shuffled).model_dump_json() == reference.model_dump_json()

    in_log_order = RunFold(RUN_KEY)
    for record in rnd.sample(latest, k=len(latest)):
        in_log_order.apply(record)
    assert in_log_order.summary() == reference
