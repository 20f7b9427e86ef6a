"""Planning a distributed run: chunk ranges, the dataset hash, and what a worker refuses."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from resultlog.producer import BenchmarkError, arith
from resultlog.producer.worker import (
    RunSpec,
    WorkError,
    dataset_sha256,
    plan_chunks,
    task_benchmark,
)

NOW = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def spec(**fields: object) -> RunSpec:
    base: dict[str, object] = {"benchmark": "arith", "model": "m", "run_id": "r", "chunks": 4}
    return RunSpec(**{**base, **fields})  # type: ignore[arg-type]


def test_chunks_cover_the_selected_samples_contiguously_and_evenly() -> None:
    tasks = plan_chunks(spec(chunks=4, limit=10, epochs=2, temperature=0.5), now=NOW)
    assert [t.sample_range for t in tasks] == [(0, 3), (3, 6), (6, 8), (8, 10)]
    assert [t.chunk_index for t in tasks] == [0, 1, 2, 3]
    assert {t.chunks for t in tasks} == {4}
    assert [t.chunk_id for t in tasks] == [f"r/chunk-{i}-of-4" for i in range(4)]
    first = tasks[0]
    assert (first.benchmark_id, first.dataset_size, first.epochs) == ("arith", 10, 2)
    assert (first.limit, first.temperature, first.base_url, first.budget_usd) == (
        10,
        0.5,
        None,
        None,
    )
    assert first.dataset_sha256 == dataset_sha256(arith().items[:10])
    assert plan_chunks(spec(chunks=4, limit=10, epochs=2, temperature=0.5), now=NOW) == tasks


def test_a_range_is_split_as_run_selects_it() -> None:
    tasks = plan_chunks(spec(chunks=2, sample_range=(990, 1000)), now=NOW)
    assert [t.sample_range for t in tasks] == [(990, 995), (995, 1000)]
    assert (tasks[0].range_start, tasks[0].range_end) == (990, 1000)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"chunks": 11, "limit": 10}, "11 chunks for 10 samples: at most one chunk per sample"),
        ({"chunks": 0}, "--chunks must be at least 1"),
        ({"sample_range": (1000, 1010)}, "range 1000:1010 selects no sample of the 1000"),
        (
            {"sample_range": (990, 2000)},
            r"range 990:2000 goes past the 1000 samples of arith \(0:1000\): use 990:1000",
        ),
        ({"chunks": 3, "sample_range": (5, 7)}, "3 chunks for 2 samples"),
    ],
)
def test_bad_plans_are_one_line_errors(fields: dict[str, object], message: str) -> None:
    with pytest.raises(WorkError, match=message):
        plan_chunks(spec(**fields))


def test_an_unknown_benchmark_is_refused() -> None:
    with pytest.raises(BenchmarkError, match="unknown benchmark 'nope'"):
        plan_chunks(spec(benchmark="nope"))


def test_a_worker_refuses_a_jsonl_file_that_differs_from_the_submitted_one(
    tmp_path: Path,
) -> None:
    bench = tmp_path / "qa.jsonl"
    lines = [
        '{"id": "a", "input": "1 + 1?", "target": "2"}',
        '{"id": "b", "input": "2 + 2?", "target": "4"}',
    ]
    bench.write_text("\n".join(lines) + "\n")
    tasks = plan_chunks(spec(benchmark=str(bench), chunks=2))
    assert task_benchmark(tasks[0]).name == "qa"

    bench.write_text(bench.read_text().replace('"4"', '"5"'))  # same size, other content
    with pytest.raises(WorkError, match=r"differs on this worker \(2 samples, sha256 "):
        task_benchmark(tasks[0])
    bench.unlink()
    with pytest.raises(BenchmarkError, match=r"qa\.jsonl: cannot read benchmark file"):
        task_benchmark(tasks[0])


def test_the_dataset_hash_covers_every_field_of_every_sample() -> None:
    items = arith().items[:3]
    assert dataset_sha256(items) == dataset_sha256(list(items))
    assert dataset_sha256(items) != dataset_sha256(items[:2])
    assert dataset_sha256(items) != dataset_sha256([items[1], items[0], items[2]])
    assert len(dataset_sha256(())) == 64
