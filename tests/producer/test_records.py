"""The records a run builds: JSON-text fields well formed, nested parts kept, codec round trip."""

from __future__ import annotations

import json
from typing import Any

from resultlog.producer import (
    Benchmark,
    Completion,
    NoopResultStore,
    Sample,
    StaticBenchmark,
    run_benchmark,
)
from resultlog.producer.datasets import numeric_match
from resultlog.producer.model_client import CompletionUsage
from resultlog.schemas import Codec, RecordStatus, SampleResult

TOOL_CALLS: list[Any] = [
    {"id": "a", "function": {"name": "add", "arguments": '{"x": 1}'}},
    {"id": "b", "function": {"name": "add", "arguments": "{not json"}},
    {"id": "c", "function": {"name": "add", "arguments": {"y": [2, 3]}}},
    {"id": "d", "function": {}},
    "not a call",
]


class Structured(StaticBenchmark):
    """Poses the sample as text parts, the way multimodal harnesses do."""

    def messages(self, sample: Sample) -> list[dict[str, Any]]:
        return [{"role": "user", "content": [{"type": "text", "text": sample.input}]}]


async def one_record(benchmark: Benchmark, completion: Completion) -> SampleResult:
    """The single record of a one-sample run whose solver returns `completion`."""

    async def solver(bench: Benchmark, sample: Sample) -> Completion:
        return completion

    result = await run_benchmark(benchmark, "m", run_id="r", solver=solver, store=NoopResultStore())
    (record,) = result.records
    return record


def completion(**fields: Any) -> Completion:
    """A successful completion answering 42."""
    defaults: dict[str, Any] = {
        "text": "The answer is 42.",
        "reasoning": None,
        "tool_calls": None,
        "generation_id": "gen-1",
        "model": "m",
        "usage": CompletionUsage(10, 5, 15, 2, 0.25),
        "raw": {},
        "elapsed_ms": 7,
    }
    return Completion(**{**defaults, **fields})


def bench(metadata: dict[str, Any] | None) -> Structured:
    """A one-sample structured benchmark."""
    sample = Sample("s", "What is 6 * 7?", "42", metadata)
    return Structured("mine", (sample,), numeric_match)


async def test_metadata_and_prompt_parts_become_json_text() -> None:
    record = await one_record(bench({"b": [1, 2], "a": "x"}), completion())
    assert record.metadata is not None
    assert json.loads(record.metadata) == {"a": "x", "b": [1, 2]}
    prompt, answer = record.messages
    assert prompt.content is None and prompt.content_parts is not None
    assert json.loads(prompt.content_parts) == [{"type": "text", "text": "What is 6 * 7?"}]
    assert (answer.role, answer.content, answer.model) == ("assistant", "The answer is 42.", "m")
    assert record.status is RecordStatus.COMPLETED and record.score.value == "C"
    assert record.usage is not None
    assert (record.usage.total_tokens, record.usage.total_cost) == (15, 0.25)
    assert record.generation_ids == ("gen-1",) and record.generation_time_ms == 7


async def test_tool_call_arguments_are_always_well_formed_json_text() -> None:
    record = await one_record(bench(None), completion(tool_calls=TOOL_CALLS))
    assert record.metadata is None
    calls = record.messages[-1].tool_calls
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("a", "add", {"x": 1}),
        ("b", "add", "{not json"),
        ("c", "add", {"y": [2, 3]}),
        ("d", "unknown", {}),
    ]


async def test_built_records_survive_the_codec_unchanged() -> None:
    record = await one_record(bench({"k": 1}), completion(tool_calls=TOOL_CALLS))
    codec = Codec()
    assert codec.decode_sample_result(codec.encode_sample_result(record)) == record
