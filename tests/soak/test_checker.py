"""The soak checker's pure rules: summaries against replay, purged runs, repeated asks."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tests.soak.checker import (
    Ask,
    Attempt,
    Served,
    Violation,
    repeated_asks,
    served_violation,
    summary_diff,
    worker_violation,
)
from tests.soak.probe import Plant
from tests.soak.report import Outcome, closing_line, write_figures

SUMMARY = {"run_id": "r1", "records": 10, "correct_answers": 9, "accuracy": 0.9}


def _served(summary: dict[str, object], offset: int = 40) -> Served:
    return Served("a1", "r1", dict(summary), partition=2, offset=offset)


def _never(sample_id: str, epoch: int) -> bool:
    return False


def test_equal_summaries_differ_in_nothing_but_freshness() -> None:
    fresh = {**SUMMARY, "as_of": {"offsets": {"2": 40}}, "stale": False}
    assert summary_diff(fresh, dict(SUMMARY)) == []
    assert served_violation(_served(SUMMARY), dict(SUMMARY), None, 1.0) is None


def test_a_wrong_field_is_named_with_both_values() -> None:
    wrong = {**SUMMARY, "correct_answers": 10}
    found = served_violation(_served(wrong), dict(SUMMARY), None, 3.5)
    assert found is not None and found.kind == "served != replay"
    assert "correct_answers 10 != replay 9" in found.detail and "p2@40" in found.detail
    assert found.line().startswith("[    3.5s] served != replay: a1 served r1")


def test_a_run_served_past_its_purge_is_a_purged_run_served() -> None:
    found = served_violation(_served(SUMMARY, offset=50), None, purged_before=45, at_s=0)
    assert found is not None and found.kind == "purged run served"
    assert found.detail.endswith("(purged up to 45): records 10, correct_answers 9")


def test_a_run_served_before_its_purge_reached_the_instance_is_judged_by_replay() -> None:
    assert served_violation(_served(SUMMARY, offset=40), dict(SUMMARY), 45, 0) is None
    found = served_violation(_served(SUMMARY, offset=40), None, purged_before=45, at_s=0)
    assert found is not None and found.kind == "served != replay"


def test_a_printed_summary_must_equal_replay() -> None:
    assert worker_violation("r1", dict(SUMMARY), dict(SUMMARY), 0) is None
    found = worker_violation("r1", {**SUMMARY, "records": 11}, dict(SUMMARY), 0)
    assert found is not None and "records 11 != replay 10" in found.detail


def _asks(*pairs: tuple[int, str, int]) -> list[Ask]:
    return [Ask(line, "m", sample, epoch) for line, sample, epoch in pairs]


def test_one_attempt_asking_a_pair_twice_is_a_repeat() -> None:
    attempts = {"m": [Attempt("m", 0, log_start=0)]}
    found = repeated_asks(_asks((0, "s1", 0), (1, "s1", 1), (2, "s1", 0)), attempts, _never, 0)
    assert [v.kind for v in found] == ["pair asked twice"]
    assert "sample s1 epoch 0 (log line 2) twice by one attempt" in found[0].detail


def test_a_pair_in_flight_at_a_kill_may_be_asked_again() -> None:
    killed = Attempt("m", 0, log_start=0, durable_after=frozenset({("s1", 0)}), ended=True)
    attempts = {"m": [killed, Attempt("m", 0, log_start=2)]}
    # s2 was asked but not durable when the first attempt was killed: asking it again is fine.
    assert repeated_asks(_asks((0, "s1", 0), (1, "s2", 0), (2, "s2", 0)), attempts, _never, 0) == []
    found = repeated_asks(_asks((0, "s1", 0), (1, "s2", 0), (2, "s1", 0)), attempts, _never, 0)
    assert len(found) == 1
    assert "again by attempt 2 though durable after attempt 1" in found[0].detail


def test_degraded_pairs_purged_runs_and_other_clients_are_not_repeats() -> None:
    first = Attempt("m", 0, log_start=0, durable_after=frozenset({("s1", 0)}), ended=True)
    after_purge = Attempt("m", 1, log_start=1)
    attempts = {"m": [first, after_purge]}
    assert repeated_asks(_asks((0, "s1", 0), (1, "s1", 0)), attempts, _never, 0) == []
    one = {"m": [Attempt("m", 0, log_start=0)]}
    always_failing = _asks((0, "bad", 0), (1, "bad", 0))
    assert repeated_asks(always_failing, one, lambda s, e: s == "bad", 0) == []
    others = [Ask(0, "x", "s1", 0), Ask(1, "x", "s1", 0)]
    assert repeated_asks(others, one, _never, 0) == []


def test_the_plant_makes_one_wrong_summary_and_one_repeat() -> None:
    plant = Plant(enabled=True)
    served = plant.served([_served(SUMMARY), _served(SUMMARY)])
    assert served[0].summary["correct_answers"] == 10 and served[1].summary == SUMMARY
    assert plant.served([_served(SUMMARY)])[0].summary == SUMMARY  # planted once
    asks = _asks((0, "s1", 0), (1, "s2", 0))
    planted = plant.asks(asks, lambda ask: ask.sample_id == "s2")
    assert planted == [*asks, asks[1]]
    assert plant.asks([*asks, Ask(2, "m", "s3", 0)], lambda ask: True) == [
        *asks,
        asks[1],
        Ask(2, "m", "s3", 0),
    ]
    found = repeated_asks(planted, {"m": [Attempt("m", 0, log_start=0)]}, _never, 0)
    assert [v.kind for v in found] == ["pair asked twice"]
    assert Plant(enabled=False).asks(asks, lambda ask: True) == asks


def test_the_figures_count_violations_by_kind_without_the_soak_folder(tmp_path: Path) -> None:
    crash = Violation("aggregator exited", "a1 exited 1: /tmp/resultlog-soak-ab_1/a1/x/0: bad", 2)
    outcome = Outcome(seed=7, seconds=60.0, planted=False, violations=[crash, crash])
    write_figures(outcome, tmp_path / "soak.md")
    text = (tmp_path / "soak.md").read_text()
    assert "| violations | 2 (aggregator exited 2) |" in text
    assert "\n```text\n[    2.0s] aggregator exited: a1 exited 1: a1/x/0: bad\n" in text
    assert "resultlog-soak-" not in text


def test_the_figures_keep_the_last_soaks_one_row_each(tmp_path: Path) -> None:
    page = tmp_path / "soak.md"
    for seed in range(12):
        faults = Counter({"broker kill": 3 + seed, "purge": 4})
        write_figures(Outcome(seed=seed, seconds=600.0, planted=False, faults=faults), page)
    rows = [line for line in page.read_text().splitlines() if line.startswith("| 20")]
    assert len(rows) == 10
    assert [row.split(" | ")[1] for row in rows] == [str(seed) for seed in range(11, 1, -1)]
    assert rows[0].endswith("| 600 s | 18 | 2 | 4 | 0 | 0 |")


def test_the_closing_line_counts_faults_checks_and_violations() -> None:
    outcome = Outcome(seed=7, seconds=60.0, planted=False, faults=Counter(a=2, b=1), checks=5)
    assert closing_line(outcome) == "soak: 3 faults, 5 checks, 0 violations"
