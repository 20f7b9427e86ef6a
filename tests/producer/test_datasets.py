"""Benchmarks: the built-in arith set, scorers, the JSONL loader and name resolution."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from resultlog.producer.context import sample_scope
from resultlog.producer.datasets import (
    ARITH_SIZE,
    Benchmark,
    Sample,
    arith,
    exact_match,
    load_jsonl,
    normalize_answer,
    numeric_match,
    resolve_benchmark,
)
from resultlog.producer.errors import BenchmarkError, ModelError
from resultlog.producer.model_client import ModelClient, classify_model_error
from resultlog.producer.offline import ModelServer

REPO = Path(__file__).resolve().parents[2]
DIGEST = (
    "import hashlib, json; from resultlog.producer.datasets import arith; "
    "print(hashlib.sha256(json.dumps([(s.id, s.input, s.target) "
    "for s in arith().samples()]).encode()).hexdigest())"
)
# The first questions of the built-in set, answers worked out by hand: arith run keys
# resume across versions, so the dataset must never change silently.
FIRST_ARITH = [
    ("What is 890 + 967?", "1857"),
    ("What is 18 * 8 - 18?", "126"),
    ("What is 29 * 78?", "2262"),
    ("What is 454 - 331?", "123"),
    ("What is 70 * 82?", "5740"),
    ("What is 925 - 301?", "624"),
    ("What is 4 - 3 + 48?", "49"),
    ("What is 50 + 2 + 46?", "98"),
]
ANSWER = re.compile(r"The answer is (-?\d+)\.")


def python_value(question: str) -> int:
    """The value of `What is <expression>?` by Python's own arithmetic, not the benchmark's."""
    expression = question.removeprefix("What is ").removesuffix("?")
    assert re.fullmatch(r"[0-9 +*-]+", expression), question  # nothing but integer arithmetic
    value = eval(expression, {"__builtins__": {}})
    assert isinstance(value, int)
    return value


def test_arith_has_at_least_1000_distinct_indexed_questions() -> None:
    samples = arith().samples()
    assert len(samples) == ARITH_SIZE >= 1000
    assert [s.index for s in samples] == list(range(len(samples)))
    assert len({s.id for s in samples}) == len({s.input for s in samples}) == len(samples)
    for sample in samples:
        assert sample.input.startswith("What is ") and sample.input.endswith("?")
        assert sample.metadata is not None
        expression = sample.metadata["expression"]
        assert expression in sample.input
        assert sample.target == str(python_value(sample.input))
    assert {op for s in samples for op in "+-*" if f" {op} " in s.input} == {"+", "-", "*"}


def test_arith_starts_with_known_questions_and_answers() -> None:
    assert [(s.input, s.target) for s in arith().samples()[: len(FIRST_ARITH)]] == FIRST_ARITH


def test_arith_is_the_same_in_every_process() -> None:
    here = hashlib.sha256(
        json.dumps([(s.id, s.input, s.target) for s in arith().samples()]).encode()
    ).hexdigest()
    there = subprocess.run(
        [sys.executable, "-c", DIGEST], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert here == there


def test_arith_poses_the_question_as_a_user_message() -> None:
    bench = arith()
    sample = bench.samples()[0]
    messages = bench.messages(sample)
    assert messages[-1] == {"role": "user", "content": sample.input}
    assert messages[0]["role"] == "system"
    assert isinstance(bench, Benchmark)


@pytest.mark.parametrize(
    ("text", "value", "answer"),
    [
        ("42", "C", "42"),
        ("The answer is 42.", "C", "42"),
        ("  **42**!\n", "C", "42"),
        ("17 + 25 = 42", "C", "42"),
        ("42.0", "C", "42"),
        ("I think 41, no wait: 42", "C", "42"),
        ("41", "I", "41"),
        ("forty-two", "I", None),
        ("", "I", None),
    ],
)
def test_numeric_match(text: str, value: str, answer: str | None) -> None:
    scored = numeric_match("42", text)
    assert (scored.value, scored.answer) == (value, answer)
    assert scored.metrics == {"reward": 1.0 if value == "C" else 0.0}
    if answer is None:
        assert scored.explanation == "no number found in the completion"
    else:
        verdict = "equals" if value == "C" else "differs from"
        assert scored.explanation == f"final number {answer} {verdict} target 42"


def test_numeric_match_handles_negatives_and_separators() -> None:
    assert numeric_match("-23", "The result is -23.").value == "C"
    assert numeric_match("1234", "That makes 1,234.").value == "C"
    assert numeric_match("not a number", "5").value == "I"
    assert numeric_match(None, "5").value == "I"


def test_exact_match_normalizes_case_space_and_trailing_punctuation() -> None:
    assert normalize_answer("  Paris,  France.! ") == "paris, france"
    assert exact_match("Paris, France", "paris,   FRANCE!").value == "C"
    assert exact_match("Paris", "Lyon").value == "I"
    assert exact_match(None, "Paris").value == "I"
    assert exact_match("Paris", "Paris").metrics == {}


async def test_the_default_server_answers_most_arith_questions_right() -> None:
    bench = arith()
    samples = bench.samples()[:300]
    with ModelServer(latency_s=0.0) as server:
        async with ModelClient(
            server.base_url,
            max_retries=1,
            backoff_initial=0.001,
            backoff_max=0.001,
            max_connections=16,  # httpcore's per-request cost grows with open connections
        ) as client:

            async def ask(sample: Sample) -> str | ModelError:
                with sample_scope(sample.id, 0):
                    try:
                        completion = await client.complete(bench.messages(sample), model="m")
                    except ModelError as err:
                        return err
                return completion.text

            replies = await asyncio.gather(*(ask(s) for s in samples))
    values = []
    for sample, reply in zip(samples, replies, strict=True):
        if isinstance(reply, ModelError):  # the offline model fails only with 429s and 500s
            assert reply.status in (429, 500) and classify_model_error(reply) == "skip"
            values.append("S")
            continue
        stated = ANSWER.fullmatch(reply)
        assert stated is not None, reply
        right = int(stated[1]) == python_value(sample.input)
        assert bench.score(sample, reply).value == ("C" if right else "I")
        values.append("C" if right else "I")
    assert values.count("C") / len(values) >= 0.8
    assert values.count("I") >= 1 and values.count("S") >= 1


def write(tmp_path: Path, text: str, name: str = "mine.jsonl") -> Path:
    """Write a benchmark file."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_loads_samples_in_order_skipping_blank_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '{"id": "a", "input": "What is 1 + 1?", "target": "2"}\n'
        "\n   \n"
        '{"id": 7, "input": "What is 2 * 3?", "target": 6, "metadata": {"k": 1}, "src": "x"}\n',
    )
    bench = load_jsonl(path)
    assert bench.name == "mine"
    assert bench.samples() == (
        Sample("a", "What is 1 + 1?", "2", None, 0),
        Sample("7", "What is 2 * 3?", "6", {"src": "x", "k": 1}, 1),
    )
    assert bench.score(bench.samples()[1], "It is 6.").value == "C"  # numeric targets


def test_jsonl_with_text_targets_uses_exact_match(tmp_path: Path) -> None:
    path = write(tmp_path, '{"id": "q", "input": "Capital of France?", "target": "Paris"}\n')
    bench = load_jsonl(path)
    assert bench.score(bench.samples()[0], " paris. ").value == "C"
    assert bench.score(bench.samples()[0], "It is Paris").value == "I"


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ('{"id": "a", "input": "x"}\n\n{"id": "b", "input": }\n', 3, "invalid JSON"),
        ('{"id": "a", "input": "x"}\n["id", "b"]\n', 2, "expected a JSON object"),
        ('{"input": "x"}\n', 1, "missing required field 'id'"),
        ('{"id": "a"}\n', 1, "missing required field 'input'"),
        ('{"id": "a", "input": "  "}\n', 1, "must not be empty"),
        ('{"id": "a", "input": ["x"]}\n', 1, "field 'input' must be a string"),
        ('{"id": "a", "input": "x", "metadata": 3}\n', 1, "'metadata' must be an object"),
        ('{"id": "a", "input": "x"}\n{"id": "a", "input": "y"}\n', 2, "duplicate id 'a'"),
    ],
)
def test_jsonl_errors_name_the_file_and_line(
    tmp_path: Path, text: str, line: int, problem: str
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(BenchmarkError) as caught:
        load_jsonl(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: ")
    assert problem in message


def test_jsonl_duplicate_id_names_the_first_line(tmp_path: Path) -> None:
    path = write(tmp_path, '{"id": "a", "input": "x"}\n{"id": "a", "input": "y"}\n')
    with pytest.raises(BenchmarkError, match="first on line 1"):
        load_jsonl(path)


def test_jsonl_rejects_invalid_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"id": "a", "input": "x"}\n{"id": "\xff", "input": "y"}\n')
    with pytest.raises(BenchmarkError, match=r"bad\.jsonl:2: not valid UTF-8"):
        load_jsonl(path)


@pytest.mark.parametrize("text", ["", "\n  \n\n"])
def test_jsonl_rejects_an_empty_file(tmp_path: Path, text: str) -> None:
    with pytest.raises(BenchmarkError, match="no samples"):
        load_jsonl(write(tmp_path, text))


def test_jsonl_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkError, match="cannot read"):
        load_jsonl(tmp_path / "absent.jsonl")


def test_resolve_builtin_path_and_unknown(tmp_path: Path) -> None:
    assert resolve_benchmark("arith") is arith()
    path = write(tmp_path, '{"id": "a", "input": "x", "target": "y"}\n')
    assert resolve_benchmark(str(path)).name == "mine"
    assert resolve_benchmark(path).samples()[0].id == "a"
    with pytest.raises(BenchmarkError, match=r"unknown benchmark 'nope'.*arith"):
        resolve_benchmark("nope")
    with pytest.raises(BenchmarkError, match="cannot read"):
        resolve_benchmark(str(tmp_path / "missing.jsonl"))
