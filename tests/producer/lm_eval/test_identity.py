"""Request keys, model identity, answers and records of the lm-eval plugin (pure logic)."""

from __future__ import annotations

from typing import Any

from resultlog.producer.lm_eval._answers import Answer, Tokens
from resultlog.producer.lm_eval._config import (
    TaskConfig,
    args_digest,
    model_identity,
    request_key,
    run_key,
)
from resultlog.producer.lm_eval._durable import TaskState
from resultlog.producer.lm_eval._records import task_records
from resultlog.schemas import ScoreValue

_ARGS = "model=m,base_url=http://h/v1/chat/completions,num_concurrent=8,api_key=sk-1"


def test_identity_keeps_what_shapes_answers_and_hides_secrets() -> None:
    identity = model_identity("local-chat-completions", _ARGS)
    assert identity.name == "m"
    assert identity.args == {
        "model": "m",
        "base_url": "http://h/v1/chat/completions",
        "api_key": "<redacted>",
    }
    assert "sk-1" not in identity.canonical


def test_concurrency_does_not_change_a_request_key() -> None:
    one = model_identity("local-chat-completions", _ARGS.replace("=8", "=1"))
    eight = model_identity("local-chat-completions", _ARGS)
    args = ("What is 1 + 2?", {"until": ["\n\n"]})
    assert request_key(one, "generate_until", args, 0) == request_key(
        eight, "generate_until", args, 0
    )


def test_a_request_key_names_model_type_args_and_repeat() -> None:
    identity = model_identity("local-chat-completions", _ARGS)
    other = model_identity("local-chat-completions", _ARGS.replace("model=m", "model=n"))
    args = ("What is 1 + 2?", {"until": ["\n\n"]})
    keys = {
        request_key(identity, "generate_until", args, 0),
        request_key(identity, "generate_until", args, 1),
        request_key(identity, "loglikelihood", args, 0),
        request_key(other, "generate_until", args, 0),
        request_key(identity, "generate_until", ("What is 1 + 3?", args[1]), 0),
    }
    assert len(keys) == 5


def test_the_hook_digest_ignores_tuple_or_list() -> None:
    assert args_digest("loglikelihood", ("a", "b")) == args_digest("loglikelihood", ["a", "b"])


def test_answers_round_trip_through_their_message_value() -> None:
    for answer in (
        Answer("generate_until", "The answer is 3.", 0.25, 7, 1),
        Answer("loglikelihood", (-1.5, True), 0.0, 2, 0),
        Answer("loglikelihood_rolling", -12.0),
        Answer("generate_until", "4", 0.5, 3, 0, Tokens(12, 3, 15, 1)),
    ):
        assert Answer.decode(answer.encode()) == answer


def test_an_answer_written_before_tokens_were_kept_decodes_without_them() -> None:
    value = b'{"type":"generate_until","response":"4","cost":0.5,"doc_id":3,"repeat":0}'
    assert Answer.decode(value) == Answer("generate_until", "4", 0.5, 3, 0)


def _task() -> TaskState:
    identity = model_identity("local-chat-completions", _ARGS)
    config = TaskConfig({"benchmark": "t"})
    return TaskState(run_key("r", "t", identity), config, {})


def _logged(doc_id: int, value: Any, filter_name: str = "extract") -> dict[str, Any]:
    return {
        "doc_id": doc_id,
        "target": "3",
        "arguments": [("What is 1 + 2?", {"until": []})],
        "filtered_resps": ["3"],
        "filter": filter_name,
        "metrics": ["exact_match"],
        "exact_match": value,
    }


def test_each_document_becomes_one_record_scored_by_its_first_filter() -> None:
    logged = [_logged(0, 1.0), _logged(1, 0.0), _logged(0, 0.0, "none"), _logged(1, 1.0, "none")]
    records = task_records(_task(), logged, {"original": 40, "effective": 2})
    assert [(r.sample_index, r.score.value) for r in records] == [
        (0, ScoreValue.C),
        (1, ScoreValue.I),
    ]
    first = records[0]
    assert first.score.metrics == {
        "scorer:exact_match,extract": 1.0,
        "scorer:exact_match,none": 0.0,
    }
    assert (first.dataset_size, first.selected_samples, first.epochs) == (40, 2, 1)
    assert first.config_fingerprint == _task().config.fingerprint
    assert first.input == "What is 1 + 2?"


def test_a_metric_outside_zero_one_is_carried_but_not_scored() -> None:
    logged = [{**_logged(0, 0.0), "metrics": ["perplexity"], "perplexity": 12.5}]
    [record] = task_records(_task(), logged, {})
    assert record.score.value == ScoreValue.S
    assert record.score.metrics == {"scorer:perplexity,extract": 12.5}


def test_a_record_carries_its_documents_tokens_and_cost() -> None:
    task = _task()
    task.answers.update(
        {
            "a": Answer("generate_until", "3", 0.25, 0, 0, Tokens(10, 2, 12)),
            "b": Answer("generate_until", "3", 0.5, 0, 1, Tokens(11, 3, 14, 1)),
            "c": Answer("generate_until", "9", 0.0, 1, 0),  # the endpoint reported nothing
        }
    )
    first, second = task_records(task, [_logged(0, 1.0), _logged(1, 0.0)], {})
    assert first.usage is not None
    assert (first.usage.input_tokens, first.usage.output_tokens) == (21, 5)
    assert (first.usage.total_tokens, first.usage.reasoning_tokens) == (26, 1)
    assert first.usage.total_cost == first.spent_cost == 0.75
    assert (second.usage, second.spent_cost) == (None, None)
