"""The fold: the original aggregate's cases and order/duplicate independence."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import resultlog.consumers
from resultlog.consumers import RunFold, fold_records
from resultlog.schemas import (
    MAX_COST_USD,
    MAX_METRIC,
    MAX_MILLIS,
    MAX_TOKENS,
    RunSummary,
    SampleResult,
    ScoreValue,
)
from tests.support.records import RUN_KEY, USAGE_AT_BOUNDS, make_record
from tests.support.strategies import extreme_records


def test_all_epochs_skipped_counts_a_skipped_question() -> None:
    summary = fold_records(
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
    summary = fold_records(records)
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
    summary = fold_records(records)
    assert summary.accuracy == 4 / 9  # exact: Fraction(4, 9) rounded once
    assert summary.correct_answers == 1
    assert summary.total_questions == 3


def test_usage_and_generation_time_are_summed_over_all_records() -> None:
    records = [
        make_record(0, 0, tokens=10, cost=0.1, generation_time_ms=5),
        make_record(0, 1, tokens=20, cost=0.2, generation_time_ms=7),
        make_record(1, 0, "S", degraded=True),
    ]
    summary = fold_records(records)
    assert summary.usage.input_tokens == 30
    assert summary.usage.output_tokens == 15
    assert summary.usage.total_tokens == 45
    assert summary.usage.reasoning_tokens == 2
    assert summary.usage.total_cost == math.fsum([0.1, 0.2])
    assert summary.generation_time_ms == 12


def test_metric_means_exclude_skipped_records_and_count_a_missing_metric_as_zero() -> None:
    records = [
        make_record(0, 0, "C", metrics={"reward": 1.0}),
        make_record(0, 1, "I", metrics={"reward": 0.0}),
        make_record(1, 0, "S", degraded=True, metrics={"reward": 99.0}),
        make_record(1, 1, "C", metrics={"reward": 0.5, "abs_error": 2.0}),
    ]
    summary = fold_records(records)
    # The reward rule (design rule 13): the mean over the 3 records not skipped, a missing one is 0.
    assert summary.metrics == {"abs_error": 2.0 / 3, "reward": 0.5}


def test_a_scorer_metric_is_an_epoch_mean_per_sample_then_a_mean_over_scored_samples() -> None:
    records = [
        make_record(0, 0, "C", metrics={"scorer:m": 5.0, "scorer:d/x": 0.5}),
        make_record(0, 1, "S", metrics={"scorer:m": 2.0}),  # an S record still carries it
        make_record(0, 2, "C"),  # unscored in this epoch: left out, not 0
        make_record(1, 0, "I", metrics={"scorer:m": 1.0}),
        make_record(2, 0, "S", degraded=True),
        make_record(3, 0, "C", metrics={"reward": 1.0}),  # never scored by `m`
    ]
    summary = fold_records(records)
    # m: sample 0 -> (5 + 2) / 2, sample 1 -> 1; samples 2 and 3 unscored: (3.5 + 1) / 2;
    # stderr: sqrt(((3.5 - 2.25)^2 + (1 - 2.25)^2) / (2 - 1) / 2) = 1.25 (0.0 under 2 samples).
    assert summary.metrics == {
        "reward": 0.25,
        "scorer:d/x": 0.5,
        "scorer:d/x:stderr": 0.0,
        "scorer:m": 2.25,
        "scorer:m:stderr": 1.25,
    }
    assert fold_records([make_record(0, 0, "S")]).metrics == {}


def test_expected_records_and_empty_run() -> None:
    assert fold_records([make_record(0, 0, epochs=2, dataset_size=7)]).expected_records == 14
    empty = RunFold(RUN_KEY).summary()
    assert (empty.records, empty.accuracy, empty.total_questions) == (0, 0.0, 0)


def test_expected_records_count_the_newest_records_selection() -> None:
    # `inspect eval --limit 5-20 --epochs 2` of a 20-sample task: 16 samples at indexes 4-19.
    picked = [
        make_record(i, e, epochs=2, dataset_size=20, selected_samples=16)
        for i in range(4, 20)
        for e in range(2)
    ]
    summary = fold_records(picked)
    assert (summary.records, summary.expected_records, summary.out_of_shape) == (32, 32, 0)
    # Another selection, newer, of 3 samples: every record stays in shape, 3 x 2 are asked.
    again = [
        make_record(i, e, epochs=2, dataset_size=20, selected_samples=3, created_offset_ms=5)
        for i in (0, 1, 2)
        for e in range(2)
    ]
    summary = fold_records(picked + again)
    assert (summary.records, summary.expected_records) == (38, 6)
    whole = make_record(7, 0, epochs=2, dataset_size=20, created_offset_ms=9)
    assert fold_records([*again, whole]).expected_records == 40  # no selection: the whole dataset


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
    assert fold_records([completed, degraded]) == fold_records([degraded, completed])
    assert fold_records([completed, degraded]).correct_answers == 1


_records = st.builds(
    make_record,
    sample_index=st.integers(0, 9),
    epoch=st.integers(0, 2),
    value=st.sampled_from(["C", "I", "S"]),
    metrics=st.dictionaries(
        st.sampled_from(["reward", "abs_error", "scorer:m"]),
        st.floats(-1e6, 1e6, allow_nan=False),
        max_size=3,
    ),
    tokens=st.integers(0, 10_000),
    cost=st.floats(0, 10, allow_nan=False),
    generation_time_ms=st.integers(0, 100_000),
)


def _latest_per_key(records: list[SampleResult]) -> list[SampleResult]:
    latest: dict[tuple[int, int], SampleResult] = {}
    for record in records:
        latest[(record.sample_index, record.epoch)] = record
    return list(latest.values())


@settings(max_examples=200, deadline=None)
@given(st.lists(_records, min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_summary_is_identical_under_permutation_and_duplication(
    records: list[SampleResult], rnd: random.Random
) -> None:
    latest = _latest_per_key(records)
    reference = fold_records(latest)
    shuffled = latest * 2 + rnd.sample(latest, k=len(latest))
    rnd.shuffle(shuffled)
    assert fold_records(shuffled) == reference
    assert fold_records(shuffled).model_dump_json() == reference.model_dump_json()

    in_log_order = RunFold(RUN_KEY)
    for record in rnd.sample(latest, k=len(latest)):
        in_log_order.apply(record)
    assert in_log_order.summary() == reference


def test_numeric_scores_replace_c_and_i() -> None:
    records = [
        make_record(0, 0, "C", numeric=0.25),
        make_record(0, 1, "I", numeric=0.5),
        make_record(1, 0, "C"),
        make_record(1, 1, "S", degraded=True, numeric=None),
    ]
    summary = fold_records(records)
    assert summary.accuracy == (0.375 + 1.0) / 2
    assert summary.correct_answers == 1  # sample 0: 0.375 < 0.5


def test_the_newest_record_defines_the_shape() -> None:
    three = [make_record(i, e, "C", epochs=3, dataset_size=20) for i in range(20) for e in range(3)]
    two = [
        make_record(i, e, "I", epochs=2, dataset_size=20, created_offset_ms=10)
        for i in range(20)
        for e in range(2)
    ]
    summary = fold_records(three + two)
    assert summary.records == 40 and summary.out_of_shape == 20
    assert summary.expected_records == 40 and summary.accuracy == 0.0
    limited = [
        make_record(i, 0, "C", epochs=3, dataset_size=5, created_offset_ms=20) for i in range(5)
    ]
    summary = fold_records(three + two + limited)
    assert (summary.records, summary.out_of_shape, summary.expected_records) == (15, 45, 15)


def test_the_shape_returns_when_its_newest_record_is_removed() -> None:
    folded = RunFold(RUN_KEY)
    for i in range(4):
        folded.apply(make_record(i, 0, "C", epochs=1, dataset_size=4))
    folded.apply(make_record(0, 0, "C", epochs=1, dataset_size=1, created_offset_ms=5))
    assert (folded.summary().records, folded.summary().out_of_shape) == (1, 3)
    folded.remove(0, 0)
    assert (folded.summary().records, folded.summary().out_of_shape) == (3, 0)


def test_spent_cost_counts_every_attempt_of_every_latest_record() -> None:
    records = [
        make_record(0, 0, "C", epochs=2, cost=0.1, spent_cost=0.3),
        make_record(0, 1, "C", epochs=2, cost=0.2),  # a v1 record: spent is its kept cost
        make_record(5, 2, "C", epochs=3, cost=0.4, created_offset_ms=-1),
    ]
    summary = fold_records(records)
    assert summary.usage.total_cost == math.fsum([0.1, 0.2])
    assert summary.spent_cost == math.fsum([0.3, 0.2, 0.4])  # out of shape, but paid for
    assert summary.out_of_shape == 1


@pytest.mark.parametrize("sign", [1, -1])
def test_records_at_every_bound_never_stop_the_fold(sign: int) -> None:
    records = [
        make_record(
            i,
            0,
            "C",
            epochs=1,
            dataset_size=None,
            metrics={"m": sign * MAX_METRIC, "tiny": sign * 5e-324},
            numeric=1.0 if i % 2 else 5e-324,
            usage=USAGE_AT_BOUNDS,
            generation_time_ms=MAX_MILLIS,
            spent_cost=MAX_COST_USD,
        )
        for i in range(200)
    ]
    summary = fold_records(records)
    assert summary.metrics == {"m": sign * MAX_METRIC, "tiny": sign * 5e-324}
    assert summary.usage.input_tokens == 200 * MAX_TOKENS
    assert summary.usage.total_cost == 200 * MAX_COST_USD
    assert summary.generation_time_ms == 200 * MAX_MILLIS
    assert summary.accuracy == math.fsum([1.0, 5e-324] * 100) / 200


def _reference(latest: list[SampleResult]) -> dict[str, object]:
    """Design rule 13 restated plainly (a full re-fold with Fractions), to check the real fold."""
    if not latest:
        return {"records": 0, "accuracy": 0.0, "spent_cost": 0.0}
    newest = max(
        latest, key=lambda r: (int(r.created_at.timestamp() * 1000), r.sample_index, r.epoch)
    )
    epochs, size = newest.epochs, newest.dataset_size
    samples = size if newest.selected_samples is None else newest.selected_samples
    inside = [r for r in latest if r.epoch < epochs and (size is None or r.sample_index < size)]
    per_sample: dict[str, list[SampleResult]] = {}
    for record in inside:
        per_sample.setdefault(record.sample_id, []).append(record)
    values = []
    for epochs_of_sample in per_sample.values():
        kept = [r for r in epochs_of_sample if r.score.value is not ScoreValue.S]
        if kept:
            points = [
                Fraction(r.score.numeric)
                if r.score.numeric is not None
                else Fraction(r.score.value is ScoreValue.C)
                for r in kept
            ]
            values.append(sum(points, Fraction(0)) / len(points))
    not_skipped = [r for r in inside if r.score.value is not ScoreValue.S]
    names = sorted({name for r in not_skipped for name in r.score.metrics})
    metrics = {
        name: float(
            sum((Fraction(r.score.metrics.get(name, 0.0)) for r in not_skipped), Fraction(0))
            / len(not_skipped)
        )
        for name in names
        if not name.startswith("scorer:")
    }
    metrics |= _scorer_reference(inside)
    return {
        "records": len(inside),
        "out_of_shape": len(latest) - len(inside),
        "expected_records": None if samples is None else samples * epochs,
        "degraded_records": sum(r.degraded for r in inside),
        "total_questions": len(values),
        "skipped_questions": len(per_sample) - len(values),
        "correct_answers": sum(v >= Fraction(1, 2) for v in values),
        "accuracy": float(sum(values, Fraction(0)) / len(values)) if values else 0.0,
        "metrics": metrics,
        "total_cost": math.fsum(r.kept_cost for r in inside),
        "input_tokens": sum(r.usage.input_tokens for r in inside if r.usage),
        "generation_time_ms": sum(r.generation_time_ms or 0 for r in inside),
        "spent_cost": math.fsum(r.spent for r in latest),
    }


def _scorer_reference(inside: list[SampleResult]) -> dict[str, float]:
    """`scorer:` metrics: per sample the mean of the epochs carrying it, then the mean and
    the stderr (sample standard deviation over the square root of the count)."""
    by_sample: dict[str, dict[str, list[Fraction]]] = {}
    for record in inside:
        for name, value in record.score.metrics.items():
            if name.startswith("scorer:"):
                by_name = by_sample.setdefault(name, {})
                by_name.setdefault(record.sample_id, []).append(Fraction(value))
    means = {}
    for name, samples in by_sample.items():
        values = [sum(epochs, Fraction(0)) / len(epochs) for epochs in samples.values()]
        n = len(values)
        mean = sum(values, Fraction(0)) / n
        means[name] = float(mean)
        variance = sum(((v - mean) ** 2 for v in values), Fraction(0)) / (n - 1) if n > 1 else 0
        means[f"{name}:stderr"] = math.sqrt(variance / n)
    return dict(sorted(means.items()))


def _observed(summary: RunSummary) -> dict[str, object]:
    if not summary.records and not summary.out_of_shape:
        return {"records": 0, "accuracy": summary.accuracy, "spent_cost": summary.spent_cost}
    return {
        "records": summary.records,
        "out_of_shape": summary.out_of_shape,
        "expected_records": summary.expected_records,
        "degraded_records": summary.degraded_records,
        "total_questions": summary.total_questions,
        "skipped_questions": summary.skipped_questions,
        "correct_answers": summary.correct_answers,
        "accuracy": summary.accuracy,
        "metrics": summary.metrics,
        "total_cost": summary.usage.total_cost,
        "input_tokens": summary.usage.input_tokens,
        "generation_time_ms": summary.generation_time_ms,
        "spent_cost": summary.spent_cost,
    }


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), extreme_records()), min_size=1, max_size=30))
def test_incremental_fold_equals_a_full_refold_at_every_step(
    steps: list[tuple[bool, SampleResult]],
) -> None:
    folded = RunFold(RUN_KEY)
    latest: dict[tuple[int, int], SampleResult] = {}
    for remove, record in steps:
        key = (record.sample_index, record.epoch)
        if remove:
            folded.remove(*key)
            latest.pop(key, None)
        else:
            folded.apply(record)
            latest[key] = record
        assert _observed(folded.summary()) == _reference(list(latest.values()))


def test_metrics_that_vary_by_record_fold_exactly_past_the_counted_plans() -> None:
    # A run counts its records per verdict for its first verdicts only; metrics that vary by
    # record (a latency) go into the sums themselves. A record may leave the other way.
    rng = random.Random(7)
    folded = RunFold(RUN_KEY)
    latest: dict[tuple[int, int], SampleResult] = {}
    for step in range(400):
        key = (rng.randrange(60), rng.randrange(3))
        if step % 5 == 4:
            folded.remove(*key)
            latest.pop(key, None)
        else:
            value = rng.choice(["C", "I", "S"])
            metrics = {"latency_s": rng.random() * 30, "reward": rng.choice([0.0, 1.0])}
            if step % 3:
                metrics["scorer:match"] = rng.choice([0.0, 1.0])
            if step > 200 and step % 7 == 0:  # late, so mostly summed directly
                metrics["rare"] = 2.5  # present while one record has it
            record = make_record(*key, value, degraded=value == "S", metrics=metrics)
            folded.apply(record)
            latest[key] = record
        assert _observed(folded.summary()) == _reference(list(latest.values())), step


def test_the_fold_is_a_module_and_fold_records_its_function() -> None:
    import resultlog.consumers.fold as module

    assert isinstance(module, ModuleType)
    assert resultlog.consumers.fold is module
    assert resultlog.consumers.fold_records is module.fold_records
