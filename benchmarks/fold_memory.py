"""Memory the aggregator holds per record: one RunFold per run key, one contribution per key.

No broker: N realistic records (benchmarks._kafka.record, runs of 1000 samples x 2 epochs)
are encoded first, then folded as the aggregator folds them (fold view, contribution,
RunFold.apply) while tracemalloc counts what stays allocated. Prints bytes per record next to
the goal (under 200 B), for the benchmark's records and for records whose outcomes all differ
(tokens, cost and generation time vary per record, so no two share an outcome).

    .venv/bin/python -m benchmarks.fold_memory [--records 100000]
"""

from __future__ import annotations

import argparse
import gc
import tracemalloc

from benchmarks._kafka import record
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.consumers import RunFold
from resultlog.consumers.fold import Contribution
from resultlog.schemas import Codec, RunKey, SampleResult, Usage

SAMPLES_PER_RUN = 1000
EPOCHS = 2
GOAL_BYTES = 200


def records(count: int, distinct: bool) -> list[tuple[RunKey, bytes]]:
    """Encoded records of consecutive runs; `distinct` varies each record's outcome."""
    codec = Codec()
    values = []
    for n in range(count):
        run_key = RunKey(f"memory-bench-{n // (SAMPLES_PER_RUN * EPOCHS):04d}", "arith", "m")
        index, epoch = n // EPOCHS % SAMPLES_PER_RUN, n % EPOCHS
        item: SampleResult = record(run_key, index, epoch, EPOCHS, SAMPLES_PER_RUN)
        if distinct:
            tokens = 40 + n % 997
            usage = Usage(
                input_tokens=tokens,
                output_tokens=9,
                total_tokens=tokens + 9,
                total_cost=(tokens + 9) * 1e-6,
            )
            item = item.model_copy(update={"usage": usage, "generation_time_ms": 300 + n % 4001})
        values.append((run_key, codec.encode_sample_result(item)))
    return values


def bytes_per_record(values: list[tuple[RunKey, bytes]]) -> float:
    """What the folds of these values hold, per value."""
    codec = Codec()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    folds: dict[RunKey, RunFold] = {}
    for run_key, raw in values:
        folded = folds.get(run_key)
        if folded is None:
            folded = folds[run_key] = RunFold(run_key)
        folded.apply(Contribution.of(codec.decode_fold_view(raw)))
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert sum(len(f) for f in folds.values()) == len(values)
    return held / len(values)


def main() -> None:
    """Measure and print bytes per record for both kinds of records."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    add_results_argument(parser)
    args = parser.parse_args()
    print(f"{'records (' + str(args.records) + ')':<40}{'bytes/record':>14}  goal")
    for label, distinct in (("benchmark records", False), ("every outcome distinct", True)):
        held = bytes_per_record(records(args.records, distinct))
        verdict = "ok" if held < GOAL_BYTES else "OVER"
        print(f"{label:<40}{held:>14.0f}  {verdict} (< {GOAL_BYTES} B)")
        what = f"aggregator memory per record, {label}"
        report(Result(what, held, "B", goal=Goal("<", GOAL_BYTES)), args.results)


if __name__ == "__main__":
    main()
