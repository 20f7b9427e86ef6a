"""Rescoring a run from the log: new scores over stored answers, written as another run on a
real broker; no model request without a grader, and a grader never asked twice on resume."""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter

import pytest

from resultlog.consumers import read_run_records, replay_run
from resultlog.kafka import KafkaConnection
from resultlog.producer import ModelClient
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.errors import PersistenceError
from resultlog.producer.offline import Behavior, ModelServer
from resultlog.producer.rescore import (
    Grader,
    RescoreError,
    RescoreResult,
    rescore_run,
    resolve_scorer,
)
from resultlog.producer.store import KafkaResultStore, ResultStore
from resultlog.schemas import Message, RunKey, SampleResult
from resultlog.settings import Settings
from tests.support.kafka import stored_records
from tests.support.records import make_record
from tests.support.runs import FAST_WRITES, MODEL, run_with

SOURCE = RunKey("src", "arith", MODEL)


async def _source(store: KafkaResultStore, client: ModelClient, samples: int = 12) -> None:
    await run_with(limit_samples(arith(), samples), client, store, SOURCE.run_id, epochs=2)


def _read(settings: Settings, run_key: RunKey) -> list[SampleResult]:
    with KafkaConnection(settings) as kafka:
        return read_run_records(kafka, run_key).records


async def _rescore(
    settings: Settings,
    store: ResultStore,
    scorer: str,
    as_run: str,
    *,
    grader: Grader | None = None,
    max_concurrency: int = 8,
    budget_usd: float | None = None,
) -> RescoreResult:
    with KafkaConnection(settings) as kafka:
        loaded = read_run_records(kafka, SOURCE)
    return await rescore_run(
        loaded,
        as_run,
        resolve_scorer(scorer),
        store=store,
        write_policy=FAST_WRITES,
        grader=grader,
        max_concurrency=max_concurrency,
        budget_usd=budget_usd,
    )


async def test_a_rescore_keeps_answers_usage_and_bill_and_asks_no_model(
    settings: Settings,
    kafka_store: KafkaResultStore,
    model_client: ModelClient,
    model_server: ModelServer,
) -> None:
    await _source(kafka_store, model_client)
    asked = len(model_server.requests)

    result = await _rescore(settings, kafka_store, "exact", "src-exact")

    assert len(model_server.requests) == asked  # not one request: the answers are the log's
    source = {r.key: r for r in _read(settings, SOURCE)}
    rescored = _read(settings, RunKey("src-exact", SOURCE.benchmark_id, SOURCE.model))
    assert len(rescored) == len(source)
    config = json.loads(rescored[0].config or "")
    assert config["scorer"] == "exact" and config["rescored_from"]["run_id"] == "src"
    for record in rescored:
        before = source[record.key.replace(b"src-exact", b"src", 1)]
        assert (record.messages, record.usage, record.attempts, record.spent_cost) == (
            before.messages,
            before.usage,
            before.attempts,
            before.spent_cost,
        )
        assert record.generation_ids == before.generation_ids
        assert (
            record.config_fingerprint == hashlib.sha256((record.config or "").encode()).hexdigest()
        )
        assert record.degraded == before.degraded
        if before.degraded:  # nothing to score: stays as it was
            assert record.score == before.score and record.error == before.error
        else:  # "The answer is N." is no exact match of "N"
            assert record.score.value == "I"
    degraded = sum(r.degraded for r in source.values())
    assert (result.rescored, result.degraded, result.new_spend) == (
        len(source) - degraded,
        degraded,
        0.0,
    )
    assert result.carried_spend == pytest.approx(sum(r.spent for r in source.values()))
    with KafkaConnection(settings) as kafka:
        replayed = replay_run(kafka, result.summary.run_key)
    replayed_summary = replayed.summaries[result.summary.run_key]
    assert replayed_summary.model_copy(update={"as_of": None}) == result.summary
    assert result.summary.accuracy == 0.0


async def test_the_run_s_own_scorer_again_gives_the_run_s_accuracy(
    settings: Settings, kafka_store: KafkaResultStore, model_client: ModelClient
) -> None:
    await _source(kafka_store, model_client)
    result = await _rescore(settings, kafka_store, "numeric", "src-numeric")
    with KafkaConnection(settings) as kafka:
        original = replay_run(kafka, SOURCE).summaries[SOURCE]
    assert result.summary.accuracy == original.accuracy
    assert result.summary.correct_answers == original.correct_answers
    assert result.summary.degraded_records == original.degraded_records


async def test_a_second_rescore_skips_what_is_durable_and_writes_nothing(
    settings: Settings,
    kafka_store: KafkaResultStore,
    model_client: ModelClient,
    model_server: ModelServer,
) -> None:
    model_server.override("arith-0002", 1, Behavior(status=500))  # one degraded pair
    await _source(kafka_store, model_client, samples=6)
    first = await _rescore(settings, kafka_store, "includes", "src-inc")
    target = first.summary.run_key
    written = len(stored_records(settings, target))

    again = await _rescore(settings, kafka_store, "includes", "src-inc")

    assert first.degraded >= 1
    assert again.skipped == first.rescored + first.degraded
    assert (again.rescored, again.degraded) == (0, 0)
    assert len(stored_records(settings, target)) == written  # not one record written again
    assert again.carried_spend == first.carried_spend
    assert again.summary == first.summary
    with pytest.raises(RescoreError, match="another configuration"):
        await _rescore(settings, kafka_store, "exact", "src-inc")


async def test_records_without_a_stored_answer_are_counted_not_guessed(
    settings: Settings, kafka_store: KafkaResultStore
) -> None:
    answered = [
        Message(role="user", content="What is 1 + 1?"),
        Message(role="assistant", content="2"),
    ]
    for index in range(4):
        messages = answered if index % 2 else answered[:1]
        record = make_record(index, 0, "C", run_key=SOURCE, epochs=1, messages=tuple(messages))
        await kafka_store.write(record)

    result = await _rescore(settings, kafka_store, "numeric", "src-none")

    assert result.unanswered == (("q0", 0), ("q2", 0))
    assert result.rescored == 2 and result.summary.records == 2


class _Killed(ResultStore):
    """The real store, which stops taking writes after `writes` of them (a killed rescore)."""

    def __init__(self, store: KafkaResultStore, writes: int) -> None:
        self.store, self.left = store, writes

    async def write(self, record: SampleResult) -> None:
        if self.left == 0:
            raise PersistenceError("killed", retriable=False)
        self.left -= 1
        await self.store.write(record)

    async def load(self, run_key: RunKey):  # type: ignore[no-untyped-def]
        return await self.store.load(run_key)

    async def close(self) -> None:
        await self.store.close()


async def test_a_graded_rescore_asks_once_per_answer_and_resumes_without_asking_twice(
    settings: Settings,
    kafka_store: KafkaResultStore,
    model_client: ModelClient,
    model_server: ModelServer,
) -> None:
    await _source(kafka_store, model_client, samples=8)
    answered = [r for r in _read(settings, SOURCE) if not r.degraded]
    grader = Grader(model_client, "grader")
    before = model_server.request_counts()
    with pytest.raises(PersistenceError):
        await _rescore(
            settings,
            _Killed(kafka_store, 5),
            "graded",
            "src-graded",
            grader=grader,
            max_concurrency=1,
        )
    target = RunKey("src-graded", SOURCE.benchmark_id, SOURCE.model)
    durable = {(r.sample_id, r.epoch) for r in _read(settings, target) if not r.degraded}
    assert durable

    result = await _rescore(settings, kafka_store, "graded", "src-graded", grader=grader)

    after = model_server.request_counts()
    asked = Counter({pair: after[pair] - before[pair] for pair in after})
    for record in answered:
        pair = (record.sample_id, record.epoch)
        assert asked[pair] >= 1
        if pair in durable:
            assert asked[pair] == 1, pair  # graded before the kill: never asked again
    assert result.skipped == len(durable)
    for record in _read(settings, target):
        source = next(
            r for r in answered if (r.sample_id, r.epoch) == (record.sample_id, record.epoch)
        )
        assert record.attempts == (source.attempts or 0) + 1
        assert record.spent_cost is not None and record.spent_cost > source.spent
        assert json.loads(record.config or "")["grader"]["model"] == "grader"


async def test_the_budget_stops_asking_the_grader_and_says_how_many_were_left(
    settings: Settings,
    kafka_store: KafkaResultStore,
    model_client: ModelClient,
    model_server: ModelServer,
) -> None:
    model_server.override("arith-0003", 0, Behavior(status=500))  # one degraded pair
    await _source(kafka_store, model_client, samples=8)
    asked = len(model_server.requests)
    grader = Grader(model_client, "grader")

    result = await _rescore(
        settings, kafka_store, "graded", "src-budget", grader=grader, budget_usd=1e-9
    )

    # The first pair's cost was unknown, so it ran alone; it spent the budget: nothing more.
    assert result.grader_calls == len(model_server.requests) - asked == 1
    answered = sum(not r.degraded for r in _read(settings, SOURCE))
    assert result.rescored == 1 and result.unstarted == answered - 1
    assert result.new_spend > 1e-9
    # The degraded records ask nothing: copied all the same.
    assert result.summary.degraded_records == len(_read(settings, SOURCE)) - answered >= 1


@pytest.mark.parametrize(
    ("scorer", "answer", "target", "value"),
    [
        ("includes", "The answer is 42.", "42", "C"),
        ("includes", "The answer is 41.", "42", "I"),
        ("exact", " 42. ", "42", "C"),
        ("numeric", "about 3.14", "3.1", "I"),
        ("numeric:0.05", "about 3.14", "3.1", "C"),
        (r"pattern:ANSWER:\s*(\w+)", "so ANSWER: paris", "Paris", "C"),
        (r"pattern:ANSWER:\s*(\w+)", "Paris", "Paris", "I"),
    ],
)
async def test_the_built_in_scorers(scorer: str, answer: str, target: str, value: str) -> None:
    record = make_record(
        0,
        0,
        run_key=SOURCE,
        target=target,
        messages=(Message(role="user", content="q"), Message(role="assistant", content=answer)),
    )
    changed = await resolve_scorer(scorer).score(record, None)
    assert changed["score"]["value"] == value


@pytest.mark.parametrize(
    ("scorer", "said"),
    [
        ("fuzzy", "unknown scorer 'fuzzy'"),
        ("pattern:(", "not a regular expression"),
        ("numeric:-1", "tolerance must be a number >= 0"),
        ("no_such_pkg.scorers:graded", "cannot import no_such_pkg.scorers"),
        ("inspect_ai.scorer:nothing_here", "inspect_ai.scorer has no nothing_here"),
    ],
)
def test_a_bad_scorer_is_one_line(scorer: str, said: str) -> None:
    with pytest.raises(RescoreError, match=said.replace("(", r"\(")) as raised:
        resolve_scorer(scorer)
    assert "\n" not in str(raised.value)


def test_an_inspect_scorer_without_inspect_installed_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What a checkout without the inspect extra sees: the adapter cannot be imported.
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    monkeypatch.setitem(sys.modules, "resultlog.producer.rescore._inspect", None)
    for scorer in ("match", "inspect_ai.scorer:includes"):
        with pytest.raises(RescoreError, match=r"needs Inspect AI .*resultlog\[inspect\]"):
            resolve_scorer(scorer)
