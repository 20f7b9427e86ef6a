"""Write (or check) schemas/conformance.json: golden vectors for writers in other languages.

    python scripts/golden_vectors.py          # rewrite the file
    python scripts/golden_vectors.py --check  # exit 1 if the file differs from what we compute

The vectors pin what a worker in any language must produce to land where we read: encoded
keys, partitions (BLAKE2b-8 of the encoded run key, big-endian, modulo the partition count)
and the exact single-object bytes of records written with schemas v1, v2 and v3.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from enum import Enum
from io import BytesIO
from pathlib import Path
from typing import Any

from fastavro import schemaless_writer

from resultlog.schemas import (
    Codec,
    Harness,
    Message,
    RecordError,
    RunKey,
    SampleResult,
    Score,
    ScoreValue,
    ToolCall,
    Usage,
    encode_key,
    encode_run_key,
    partition_for,
    shipped_catalog,
)

OUTPUT = Path(__file__).resolve().parent.parent / "schemas" / "conformance.json"
PARTITIONS = 6
RUN_KEYS = [
    RunKey("run-1", "arith", "openai/gpt-4o"),
    RunKey("2026-11-30T07:00:00Z", "mmlu pro", "anthropic/claude-3.5-sonnet:beta"),
    RunKey("ümlaut-✓", "gsm8k", "meta-llama/llama-3-70b"),
    RunKey("a~b.c_d-e", "100%/done", "x"),
]
_CREATED = datetime(2026, 11, 30, 7, 30, 12, 345000, tzinfo=UTC)


def _completed() -> SampleResult:
    return SampleResult(
        run_id="run-1",
        benchmark_id="arith",
        model="openai/gpt-4o",
        sample_index=7,
        epoch=1,
        sample_id="arith-0007",
        status="completed",
        created_at=_CREATED,
        epochs=2,
        dataset_size=1000,
        usage=Usage(input_tokens=12, output_tokens=3, total_tokens=15, total_cost=0.0001),
        generation_time_ms=830,
        score=Score(value=ScoreValue.C, answer="42", explanation="exact", metrics={"reward": 1.0}),
        chunk_id="run-1/chunk-0",
        chunk_index=0,
        generation_ids=("gen-1",),
        target="42",
        input="What is 17 + 25?",
        messages=(
            Message(role="user", content="What is 17 + 25?"),
            Message(
                role="assistant",
                content="42",
                model="openai/gpt-4o",
                tool_calls=(ToolCall(id="c1", name="calc", arguments='{"x": 1}'),),
            ),
        ),
        metadata='{"difficulty": "easy"}',
    )


def _v2(record: SampleResult) -> SampleResult:
    """The record with every field schema v2 added."""
    messages = list(record.messages)
    messages[-1] = messages[-1].model_copy(
        update={"reasoning_details": '[{"type": "reasoning.text", "text": "17+25"}]'}
    )
    return _with(
        record,
        **{
            "score": record.score.model_copy(update={"numeric": 0.75}),
            "messages": tuple(messages),
            "attempts": 2,
            "spent_cost": 0.0003,
            "config": '{"model": "openai/gpt-4o", "temperature": 0.0}',
            "config_fingerprint": "sha256:9f2c",
            "harness": Harness(name="inspect_ai", version="0.3.285"),
            "harness_payload": bytes.fromhex("28b52ffd2000"),
        },
    )


def _degraded() -> SampleResult:
    return _with(
        _completed(),
        **{
            "status": "degraded",
            "score": Score(value=ScoreValue.S, explanation="model error"),
            "usage": None,
            "generation_time_ms": None,
            "error": RecordError(kind="model_error", message="HTTP 429", http_status=429),
            "messages": (),
            "generation_ids": (),
        },
    )


def _with(record: SampleResult, **update: Any) -> SampleResult:
    """A copy of the record with fields replaced, validated like any new record."""
    return SampleResult(**(dict(record) | update))


def _jsonable(value: Any) -> Any:
    """An Avro datum as JSON: bytes as hex, timestamps as epoch milliseconds, enums as text."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, Enum):
        return value.value
    return value


def _v1_datum(record: SampleResult) -> dict[str, Any]:
    """The record reduced to the fields of schema v1."""
    v1 = shipped_catalog().get("resultlog.SampleResult", 1)
    datum = {k: v for k, v in record.model_dump().items() if k in _names(v1.definition)}
    datum["score"].pop("numeric")
    for message in datum["messages"]:
        message.pop("reasoning_details")
        message.pop("citations")
    return datum


def _names(definition: Any) -> set[str]:
    return {field["name"] for field in definition["fields"]}


def _single_object(version: int, datum: dict[str, Any]) -> bytes:
    schema = shipped_catalog().get("resultlog.SampleResult", version)
    buf = BytesIO()
    buf.write(b"\xc3\x01" + schema.fingerprint)
    schemaless_writer(buf, schema.parsed, datum)
    return buf.getvalue()


def build() -> dict[str, Any]:
    """The conformance vectors."""
    codec = Codec()
    keys = [
        {
            "run_key": {"run_id": k.run_id, "benchmark_id": k.benchmark_id, "model": k.model},
            "encoded_run_key": encode_run_key(k).decode(),
            "key_sample_3_epoch_0": encode_key(k, 3, 0).decode(),
            "partition": partition_for(k, PARTITIONS),
        }
        for k in RUN_KEYS
    ]
    records = []
    for name, record in [("completed", _completed()), ("degraded", _degraded())]:
        datum = _v1_datum(record)
        records.append(_vector(f"{name}.v1", 1, record.key, datum, _single_object(1, datum)))
        full = _v2(record) if name == "completed" else record
        datum = {k: v for k, v in full.model_dump().items() if k != "selected_samples"}
        records.append(_vector(f"{name}.v2", 2, full.key, datum, _single_object(2, datum)))
        if name == "completed":  # v3's one new field, as an `inspect eval --limit 5-20` sets it
            full = _with(full, selected_samples=16)
        raw = codec.encode_sample_result(full)
        records.append(_vector(f"{name}.v3", 3, full.key, full.model_dump(), raw))
    return {
        "about": (
            "Golden vectors of resultlog's wire contract; see docs/design.md, 'The wire contract'."
        ),
        "partitions": PARTITIONS,
        "partitioner": "blake2b(encoded_run_key, digest_size=8) read big-endian, mod partitions",
        "schemas": {
            f"SampleResult.v{v.version}": v.fingerprint.hex()
            for v in shipped_catalog().versions("resultlog.SampleResult")
        },
        "keys": keys,
        "records": records,
        "tombstone": {
            "key": _completed().key.decode(),
            "value": None,
            "meaning": "deletes the key: readers forget its record (resume, replay, aggregator)",
        },
    }


def _vector(name: str, version: int, key: bytes, datum: dict[str, Any], raw: bytes) -> Any:
    return {
        "name": name,
        "schema_version": version,
        "key": key.decode(),
        "datum": _jsonable(datum),
        "single_object_hex": raw.hex(),
    }


def render() -> str:
    """The file's exact text."""
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


def main() -> int:
    """Write the vectors, or check them with --check."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    text = render()
    if args.check:
        if OUTPUT.read_text(encoding="utf-8") != text:
            print(f"{OUTPUT} is stale: run scripts/golden_vectors.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
