"""Encode/decode throughput of the resultlog codec next to raw fastavro on the same record."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from io import BytesIO

from fastavro import schemaless_reader, schemaless_writer

from resultlog.schemas import (
    Codec,
    Message,
    RecordStatus,
    SampleResult,
    Score,
    ScoreValue,
    ToolCall,
    Usage,
    WriterProcess,
    shipped_catalog,
)

_BUDGET = 1.5


_SYSTEM = (
    "You are a careful arithmetic assistant. Think step by step, use the calc tool for any "
    "non-trivial computation, and finish with the bare numeric answer on its own line."
)
_REASONING = (
    "The user asks for 17 + 25 and wants the reasoning shown. Break it into tens and units: "
    "17 is one ten and seven units, 25 is two tens and five units. Tens: 1 + 2 = 3 tens, i.e. "
    "30. Units: 7 + 5 = 12, which is one ten and two units. So the total is 30 + 12 = 42. "
    "The instructions say to use the calc tool for anything non-trivial; this is simple, but "
    "a tool call is cheap and guards against a slip, so I will confirm with calc before "
    "answering. If the tool disagrees I will redo the column addition carefully, carrying "
    "the one from the units column into the tens column, and report whichever result the "
    "re-check supports. Then I will write the working in prose and put 42 on the last line."
)
_ANSWER = (
    "Split each number into tens and units: 17 = 10 + 7 and 25 = 20 + 5. Adding the tens "
    "gives 10 + 20 = 30; adding the units gives 7 + 5 = 12. Combining, 30 + 12 = 42, which "
    "the calculator confirms.\n42"
)


def realistic_record(chatty: bool = True) -> SampleResult:
    """A completed tool-using chat record: five messages, usage, metrics; `chatty` = long texts."""
    question = "What is 17 + 25? Show your reasoning, then give the final answer on its own line."
    messages = (
        Message(role="system", content=_SYSTEM if chatty else "Be careful."),
        Message(role="user", content=question),
        Message(
            role="assistant",
            content=None,
            reasoning=_REASONING if chatty else "Use calc.",
            tool_calls=(ToolCall(id="call_1", name="calc", arguments='{"expression": "17 + 25"}'),),
            model="openai/gpt-4o-mini",
        ),
        Message(role="tool", content="42", tool_call_id="call_1"),
        Message(role="assistant", content=_ANSWER if chatty else "42", model="openai/gpt-4o-mini"),
    )
    return SampleResult(
        run_id="wf-2f6c1d9e-eval-arith",
        chunk_id="wf-2f6c1d9e-eval-arith-chunk-3",
        chunk_index=3,
        benchmark_id="arith",
        model="openai/gpt-4o-mini",
        sample_id="arith-000417",
        sample_index=417,
        epoch=1,
        epochs=3,
        dataset_size=1000,
        status=RecordStatus.COMPLETED,
        score=Score(
            value=ScoreValue.C,
            answer="42",
            explanation="exact match",
            metrics={"reward": 1.0, "format": 1.0, "latency_s": 1.734},
            trajectory=json.dumps({"steps": [{"tool": "calc", "ok": True}]}),
        ),
        messages=messages,
        generation_ids=("gen-01HZX3", "gen-01HZX4"),
        metadata=json.dumps({"difficulty": "easy", "operands": [17, 25]}),
        input=question,
        target="42",
        usage=Usage(
            input_tokens=312,
            output_tokens=58,
            total_tokens=370,
            reasoning_tokens=21,
            total_cost=4.1e-4,
        ),
        generation_time_ms=1734,
        worker=WriterProcess(host="worker-7", pid=48211),
        created_at=datetime(2026, 11, 29, 7, 30, 12, 345000, tzinfo=UTC),
    )


def best_rates(fns: dict[str, Callable[[], object]], n: int, rounds: int) -> dict[str, float]:
    """Best calls/s of each function, timed in alternation so machine noise hits all alike."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(n):
                fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: n / seconds for name, seconds in best.items()}


def measure(record: SampleResult, n: int, rounds: int) -> list[tuple[str, float, float]]:
    """(op, codec rec/s, raw fastavro rec/s) for encode and decode of one record."""
    codec = Codec()
    parsed = shipped_catalog().current("resultlog.SampleResult").parsed
    datum = record.model_dump()
    framed = codec.encode_sample_result(record)
    body = framed[10:]
    assert codec.decode_sample_result(framed) == record

    def raw_encode() -> bytes:
        buf = BytesIO()
        schemaless_writer(buf, parsed, datum)
        return buf.getvalue()

    rates = best_rates(
        {
            "codec encode": lambda: codec.encode_sample_result(record),
            "raw encode": raw_encode,
            "codec decode": lambda: codec.decode_sample_result(framed),
            "raw decode": lambda: schemaless_reader(BytesIO(body), parsed),
        },
        n,
        rounds,
    )
    return [(op, rates[f"codec {op}"], rates[f"raw {op}"]) for op in ("encode", "decode")]


def main() -> None:
    """Measure and print both codecs side by side, with the overhead ratio."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=20_000, help="calls per timing")
    parser.add_argument("--repeats", type=int, default=7, help="alternating rounds")
    args = parser.parse_args()

    print(
        f"{'record':<8}{'op':<8}{'codec rec/s':>14}{'fastavro rec/s':>17}{'overhead':>10}  budget"
    )
    for label, chatty in (("chatty", True), ("terse", False)):
        record = realistic_record(chatty)
        size = len(Codec().encode_sample_result(record))
        print(f"# {label}: {size} bytes framed, {len(record.messages)} messages")
        for op, ours, raw in measure(record, args.n, args.repeats):
            ratio = raw / ours
            verdict = "ok" if ratio <= _BUDGET else "OVER"
            print(
                f"{label:<8}{op:<8}{ours:>14,.0f}{raw:>17,.0f}{ratio:>9.2f}x"
                f"  {verdict} (<= {_BUDGET}x)"
            )


if __name__ == "__main__":
    main()
