"""Random valid records and run keys, encoded by resultlog's Python codec, as a JSON file.

The TypeScript tests read it and must produce the same bytes and partitions. Usage:
`generate_vectors.py SEED RECORDS KEYS OUT`. JSON conventions: bytes as {"hex": ...}, integers
beyond 2^53 as {"long": "digits"}, the metrics map as {"map": [[key, value], ...]} in the
record's own order, timestamps as epoch milliseconds.
"""

from __future__ import annotations

import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from resultlog.schemas import (
    Codec,
    RecordStatus,
    RunKey,
    SampleResult,
    ScoreValue,
    encode_key,
    encode_run_key,
    partition_for,
)

PARTITIONS = (1, 3, 6, 7, 64, 1000)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SAFE = 2**53
# Characters a run key part may hold: reserved URL bytes, spaces, accents, CJK, an emoji.
ALPHABET = "abcXYZ019-._~ /:%?#&+=@!*()'\"ü✓漢字😀é"
TEXT = ALPHABET + "\n\t\\\u2028"


def text(rng: random.Random, low: int = 0, high: int = 12) -> str:
    """A random string (control characters included: only run key parts refuse them)."""
    return "".join(rng.choice(TEXT) for _ in range(rng.randint(low, high)))


def part(rng: random.Random) -> str:
    """A random valid run key part."""
    while True:
        value = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 16)))
        if value not in (".", ".."):
            return value


def maybe(rng: random.Random, value: Any) -> Any:
    return value if rng.random() < 0.6 else None


def json_text(rng: random.Random) -> str:
    value = {text(rng, 1, 5): [rng.randint(-9, 9), text(rng), rng.random() < 0.5, None]}
    return json.dumps(value, ensure_ascii=rng.random() < 0.5)


def metrics(rng: random.Random) -> dict[str, float]:
    """Metric names integer-like and not, in an order JavaScript objects would change."""
    names = [str(rng.randint(0, 99)), text(rng, 1, 6), "__proto__", "10", "2", "constructor"]
    values = [rng.uniform(-1e12, 1e12), -0.0, 5e-324, 0.1, 1.0, rng.random()]
    return {rng.choice(names): rng.choice(values) for _ in range(rng.randint(0, 6))}


def record(rng: random.Random) -> SampleResult:
    """A random record the Python models accept."""
    epochs = rng.randint(1, 2**31 - 1) if rng.random() < 0.2 else rng.randint(1, 5)
    size = rng.choice([None, rng.randint(1, 2**31 - 1)])
    index = rng.randint(0, (size or 2**31) - 1)
    degraded = rng.random() < 0.3
    usage = maybe(
        rng,
        {
            "input_tokens": rng.randint(0, 2**32 - 1),
            "output_tokens": rng.randint(0, 9999),
            "total_tokens": rng.randint(0, 2**32 - 1),
            "reasoning_tokens": rng.randint(0, 99),
            "total_cost": rng.choice([0.0, rng.uniform(0, 1e6), 1e-9]),
        },
    )
    kept = usage["total_cost"] if usage else 0.0
    config = maybe(rng, json_text(rng))
    messages = [
        {
            "role": rng.choice(["user", "assistant", "tool", text(rng, 1, 4)]),
            "content": maybe(rng, text(rng, 0, 40)),
            "content_parts": maybe(rng, json_text(rng)),
            "tool_calls": [
                {"id": text(rng), "name": text(rng, 1, 8), "arguments": json_text(rng)}
                for _ in range(rng.randint(0, 2))
            ],
            "tool_call_id": maybe(rng, text(rng)),
            "reasoning": maybe(rng, text(rng)),
            "model": maybe(rng, text(rng)),
            "reasoning_details": maybe(rng, json_text(rng)),
            "citations": maybe(rng, json_text(rng)),
        }
        for _ in range(rng.randint(0, 3))
    ]
    return SampleResult(
        run_id=part(rng),
        benchmark_id=part(rng),
        model=part(rng),
        sample_index=index,
        epoch=rng.randint(0, epochs - 1),
        sample_id=text(rng, 1, 20),
        status=RecordStatus.DEGRADED if degraded else RecordStatus.COMPLETED,
        created_at=EPOCH + timedelta(milliseconds=rng.randint(-62135596800000, 253402300799999)),
        epochs=epochs,
        dataset_size=size,
        selected_samples=maybe(rng, rng.randint(1, size or 2**31 - 1)),
        usage=usage,
        generation_time_ms=maybe(rng, rng.randint(0, 2**32 - 1)),
        attempts=maybe(rng, rng.randint(0, 2**31 - 1)),
        spent_cost=maybe(rng, kept + rng.choice([0.0, 0.25, 1e-7])),
        config_fingerprint=None if config is None else text(rng, 1, 64),
        score={
            "value": rng.choice(list(ScoreValue)),
            "numeric": maybe(rng, rng.choice([0.0, 1.0, rng.random()])),
            "metrics": metrics(rng),
            "answer": maybe(rng, text(rng)),
            "explanation": text(rng),
            "trajectory": maybe(rng, json_text(rng)),
        },
        error={
            "kind": text(rng, 1, 10),
            "message": text(rng),
            "http_status": maybe(rng, rng.randint(100, 599)),
        }
        if degraded
        else None,
        chunk_id=maybe(rng, text(rng)),
        chunk_index=maybe(rng, rng.randint(0, 2**31 - 1)),
        worker=maybe(rng, {"host": text(rng), "pid": rng.choice([1, SAFE + 1, 2**63 - 1])}),
        generation_ids=[text(rng) for _ in range(rng.randint(0, 3))],
        target=maybe(rng, text(rng)),
        input=text(rng, 0, 60),
        messages=messages,
        response_items=maybe(rng, json_text(rng)),
        metadata=maybe(rng, json_text(rng)),
        truncated=maybe(rng, json_text(rng)),
        config=config,
        harness=maybe(rng, {"name": text(rng, 1, 8), "version": text(rng)}),
        harness_payload=maybe(rng, rng.randbytes(rng.randint(0, 64))),
    )


def as_json(value: Any, path: str = "") -> Any:
    """A datum in the conventions the TypeScript tests read."""
    if path == ".score.metrics":
        return {"map": [[k, as_json(v)] for k, v in value.items()]}
    if isinstance(value, dict):
        return {k: as_json(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, datetime):
        return (value - EPOCH) // timedelta(milliseconds=1)
    if isinstance(value, bool) or value is None or isinstance(value, float | str):
        return value.value if hasattr(value, "value") else value
    if isinstance(value, int):
        return value if abs(value) <= SAFE else {"long": str(value)}
    return value.value  # an enum


def run_key_vector(rng: random.Random) -> dict[str, Any]:
    run_key = RunKey(part(rng), part(rng), part(rng))
    sample_index, epoch = rng.randint(0, 2**63 - 1), rng.randint(0, 2**31 - 1)
    return {
        "run_key": {
            "runId": run_key.run_id,
            "benchmarkId": run_key.benchmark_id,
            "model": run_key.model,
        },
        "encoded": encode_run_key(run_key).decode("ascii"),
        "sample_index": str(sample_index),
        "epoch": epoch,
        "key": encode_key(run_key, sample_index, epoch).decode("ascii"),
        "partitions": {str(n): partition_for(run_key, n) for n in PARTITIONS},
    }


def main() -> None:
    seed, records, keys = (int(arg) for arg in sys.argv[1:4])
    out_path = Path(sys.argv[4])
    rng = random.Random(seed)
    codec = Codec()
    made = [record(rng) for _ in range(records)]
    vectors = {
        "seed": seed,
        "keys": [run_key_vector(rng) for _ in range(keys)],
        "records": [
            {"datum": as_json(r.model_dump()), "hex": codec.encode_sample_result(r).hex()}
            for r in made
        ],
    }
    out_path.write_text(json.dumps(vectors, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
