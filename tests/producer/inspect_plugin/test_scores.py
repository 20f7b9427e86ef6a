"""Scores under a real `inspect eval`: the run summary carries Inspect's own numbers.

One eval of four tasks against the offline model server, each a scorer shape the C/I
accuracy cannot hold: a numeric score outside [0, 1], a dict score, a second scorer unscored
on half the samples, and `model_graded_qa` first and unscored everywhere. For every scorer
of each task's Inspect log, the summary replayed from the topic equals Inspect's mean (or
accuracy) and stderr.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from inspect_ai.log import EvalLog, read_eval_log

from resultlog.consumers import SCORER_PREFIX, replay_run
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey, RunSummary
from resultlog.settings import Settings
from tests.producer.inspect_plugin.support import (
    INSPECT,
    MODEL,
    TIMEOUT_S,
    fresh_settings,
    inspect_env,
)
from tests.support.aggregator import served, serving_aggregator
from tests.support.cli import child_env
from tests.support.summaries import bare
from tests.support.waiting import wait_for

TASKS = """
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import (
    Score, Target, accuracy, match, mean, model_graded_qa, scorer, stderr
)
from inspect_ai.solver import TaskState, generate

SUMS = [(17, 25), (3, 4), (100, 23), (8, 9), (41, 1), (6, 60), (12, 30), (7, 5)]


def sums() -> list[Sample]:
    return [
        Sample(id=f"q{i}", input=f"What is {a} + {b}?", target=str(a + b))
        for i, (a, b) in enumerate(SUMS, start=1)
    ]


def right(state: TaskState, target: Target) -> bool:
    return state.output.completion.rstrip(". ").endswith(target.text)


@scorer(metrics=[mean(), stderr()])
def points():
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=5.0 if right(state, target) else 2.0)
    return score


@scorer(metrics={"exact": [mean(), stderr()], "partial": [mean(), stderr()]})
def parts():
    async def score(state: TaskState, target: Target) -> Score:
        good = right(state, target)
        return Score(value={"exact": 1.0 if good else 0.0, "partial": 0.3 if good else 0.1})
    return score


@scorer(metrics=[accuracy()])
def every_other():
    async def score(state: TaskState, target: Target) -> Score:
        if int(str(state.sample_id)[1:]) % 2:
            return Score.unscored()
        return Score(value="C" if right(state, target) else "I")
    return score


def shaped(scorers) -> Task:
    return Task(dataset=sums(), solver=generate(), scorer=scorers, epochs=2)


@task
def numeric() -> Task:
    return shaped(points())


@task
def keyed() -> Task:
    return shaped(parts())


@task
def half() -> Task:
    return shaped([match(numeric=True), every_other()])


@task
def graded() -> Task:
    return shaped([model_graded_qa(), match(numeric=True)])
"""

NAMES = ("numeric", "keyed", "half", "graded")


@dataclass(frozen=True)
class Eval:
    """The eval's topics and each task's Inspect log."""

    settings: Settings
    logs: dict[str, EvalLog]


@pytest.fixture(scope="module")
def scored(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Eval]:
    """`inspect eval` of the four tasks to the end, run "scores"."""
    settings = fresh_settings(kafka_bootstrap)
    where = tmp_path_factory.mktemp("scores")
    (where / "shapes.py").write_text(TASKS)
    with ModelServer(latency_s=0.002) as server:
        env = inspect_env(child_env(settings), server)
        command = [INSPECT, "eval", *(f"shapes.py@{name}" for name in NAMES), "--model", MODEL]
        command += ["--metadata", "resultlog_run=scores", "--log-dir", "logs"]
        done = subprocess.run(
            [*command, "--display", "plain"],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    logs = [read_eval_log(str(path)) for path in (where / "logs").glob("*.eval")]
    yield Eval(settings, {log.eval.task: log for log in logs})


def _summary(settings: Settings, name: str) -> RunSummary:
    key = RunKey("scores", name, MODEL)
    with KafkaConnection(settings) as kafka:
        return replay_run(kafka, key).summaries[key]


_SUFFIXES = {"accuracy": "", "mean": "", "stderr": ":stderr"}


def _inspects(log: EvalLog) -> dict[str, float]:
    """Every metric of every scorer (or dict key) in Inspect's log, named as the summary does.

    Inspect's `accuracy` and `mean` are one reduction (the epoch mean per sample, then the
    mean over scored samples); a scorer that scored no sample has no value.
    """
    assert log.results is not None
    values = {}
    for score in log.results.scores:
        name = score.scorer if score.name == score.scorer else f"{score.scorer}/{score.name}"
        assert {m.name for m in score.metrics.values()} <= _SUFFIXES.keys()  # all checked
        if score.scored_samples:
            for metric in score.metrics.values():
                values[SCORER_PREFIX + name + _SUFFIXES[metric.name]] = metric.value
    return values


def _carried(summary: RunSummary) -> dict[str, float]:
    return {k: v for k, v in summary.metrics.items() if k.startswith(SCORER_PREFIX)}


@pytest.mark.parametrize("name", NAMES)
def test_every_scorer_of_the_summary_equals_inspects(scored: Eval, name: str) -> None:
    log = scored.logs[name]
    assert log.status == "success"
    carried, inspects = _carried(_summary(scored.settings, name)), _inspects(log)
    assert inspects.keys() <= carried.keys()  # the summary has a stderr of every scorer
    assert {k for k in carried if not k.endswith(":stderr")} <= inspects.keys()
    for metric, value in inspects.items():
        # The fold computes exactly and rounds once; Inspect adds floats (0.3 + 0.1 ...), which
        # can move the last bit or two. Sums exact in floating point agree to the bit (below).
        assert carried[metric] == pytest.approx(value, rel=1e-12, abs=1e-15), metric


def test_a_numeric_score_outside_0_1_is_its_mean_not_a_clamped_accuracy(scored: Eval) -> None:
    summary, inspects = _summary(scored.settings, "numeric"), _inspects(scored.logs["numeric"])
    mean, spread = inspects["scorer:points"], inspects["scorer:points:stderr"]
    assert 2.0 < mean < 5.0 and spread > 0  # most answers right, some wrong
    assert summary.metrics["scorer:points"] == mean
    assert summary.metrics["scorer:points:stderr"] == pytest.approx(spread, rel=1e-12)
    assert (summary.total_questions, summary.skipped_questions) == (0, 8)  # no C/I meaning


def test_a_dict_score_is_each_keys_mean(scored: Eval) -> None:
    summary = _summary(scored.settings, "keyed")
    assert 0.5 < summary.metrics["scorer:parts/exact"] < 1.0
    assert 0.1 < summary.metrics["scorer:parts/partial"] < 0.3
    assert summary.total_questions == 0  # a dict has no C/I meaning: no made-up 0.0 accuracy


def test_a_scorer_unscored_on_half_the_samples_is_its_mean_over_the_others(scored: Eval) -> None:
    log, summary = scored.logs["half"], _summary(scored.settings, "half")
    assert log.results is not None
    [unscored] = [s for s in log.results.scores if s.name == "every_other"]
    assert (unscored.scored_samples, unscored.unscored_samples) == (4, 4)
    assert summary.metrics["scorer:every_other"] == unscored.metrics["accuracy"].value
    first = log.results.scores[0].metrics["accuracy"].value
    assert summary.accuracy == summary.metrics["scorer:match"] == first


def test_a_later_scorer_counts_when_an_unscored_grader_comes_first(scored: Eval) -> None:
    log, summary = scored.logs["graded"], _summary(scored.settings, "graded")
    assert log.results is not None
    grader, matched = log.results.scores
    assert grader.scored_samples == 0  # the offline model never answers GRADE: C
    assert summary.metrics["scorer:match"] == matched.metrics["accuracy"].value
    assert "scorer:model_graded_qa" not in summary.metrics


def test_the_aggregator_serves_the_same_summaries_to_the_bit(scored: Eval) -> None:
    keys = [RunKey("scores", name, MODEL) for name in NAMES]
    replayed = {key: bare(_summary(scored.settings, key.benchmark_id)) for key in keys}
    with serving_aggregator(scored.settings) as (_, url):
        for key in keys:

            def caught_up(key: RunKey = key) -> bool:
                return served(url, key) == replayed[key]

            wait_for(caught_up, f"the aggregator's summary of {key.benchmark_id}")
