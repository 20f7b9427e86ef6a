"""The runs page's test data: two runs of one benchmark with known values and flips."""

from __future__ import annotations

from resultlog.schemas import RunKey, SampleResult, encode_run_key
from tests.support.records import make_record

RUN_A = RunKey("page-a", "arith", "demo/model-a")
RUN_B = RunKey("page-b", "arith", "demo/model-b")
EPOCHS, SAMPLES = 2, 4

# Per sample, the value of each epoch. A: q0 worth 1, q1 1/2, q2 0, q3 skipped (S, S): accuracy
# 1/2 over 3 samples, sample variance 1/4, stderr sqrt(1/12). B: q0 0 (C->I), q1 1, q2 1/2
# (I->C), q3 1 (B alone: not shared). Shared q0..q2, b - a = -1, 1/2, 1/2: mean 0, sample
# variance 3/4, paired stderr 1/2, interval [-0.98, 0.98].
OUTCOMES_A = ("CC", "CI", "II", "SS")
OUTCOMES_B = ("II", "CC", "CI", "CC")


def known_records(
    run_key: RunKey, outcomes: tuple[str, ...], offset_ms: int = 0
) -> list[SampleResult]:
    """The records of `outcomes` (one string of epoch values per sample); S ones degraded."""
    return [
        make_record(
            index,
            epoch,
            value,
            run_key=run_key,
            epochs=EPOCHS,
            dataset_size=SAMPLES,
            degraded=value == "S",
            created_offset_ms=offset_ms + 10 * (index * EPOCHS + epoch),
        )
        for index, values in enumerate(outcomes)
        for epoch, value in enumerate(values)
    ]


def run_path(run_key: RunKey) -> str:
    """`run_id/benchmark/model`, each segment percent-encoded: the form in paths and queries."""
    return encode_run_key(run_key).decode()


def compare_query(a: RunKey, b: RunKey) -> str:
    """The query of /compare and /page/compare for two runs."""
    return f"a={run_path(a)}&b={run_path(b)}"
