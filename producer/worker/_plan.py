"""Planning a distributed run: its chunks, and the benchmark a worker rebuilds from a task."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, datetime
from typing import Any

from resultlog.producer._config import dataset_sha256
from resultlog.producer.datasets import Benchmark, limit_samples, resolve_benchmark
from resultlog.producer.errors import ProducerError
from resultlog.schemas import ChunkTask

__all__ = ["RunSpec", "WorkError", "dataset_sha256", "plan_chunks", "task_benchmark"]


class WorkError(ProducerError):
    """A distributed run cannot be planned, submitted or run as its task says."""


@dataclass(frozen=True)
class RunSpec:
    """What `resultlog submit` is asked: a run's identity and configuration, and its chunks."""

    benchmark: str
    model: str
    run_id: str
    chunks: int
    epochs: int = 1
    limit: int | None = None
    sample_range: tuple[int, int] | None = None
    base_url: str | None = None
    degrade_solver_errors: bool = False
    temperature: float | None = None
    max_tokens: int | None = None
    budget_usd: float | None = None
    max_pair_usd: float | None = None


# What a task carries of its spec as it is: the fields of one name in both.
_CARRIED = tuple(item.name for item in fields(RunSpec) if item.name in ChunkTask.model_fields)


def load_benchmark(source: str, limit: int | None) -> Benchmark:
    """A built-in benchmark or JSONL file, limited to its first `limit` samples."""
    benchmark = resolve_benchmark(source)
    return benchmark if limit is None else limit_samples(benchmark, limit)


def plan_chunks(
    spec: RunSpec, benchmark: Benchmark | None = None, *, now: datetime | None = None
) -> list[ChunkTask]:
    """The run's selected samples split into `spec.chunks` contiguous ranges, a task each.

    Raises WorkError when the range selects no sample or there are more chunks than samples.
    """
    if spec.chunks < 1:
        raise WorkError(f"--chunks must be at least 1, got {spec.chunks}")
    benchmark = benchmark or load_benchmark(spec.benchmark, spec.limit)
    samples = benchmark.samples()
    low, high = _selected(spec, benchmark.name, len(samples))
    if spec.chunks > high - low:
        raise WorkError(
            f"{spec.chunks} chunks for {high - low} samples: at most one chunk per sample"
        )
    common: dict[str, Any] = {
        **{name: getattr(spec, name) for name in _CARRIED},
        "benchmark_id": benchmark.name,
        "dataset_sha256": dataset_sha256(samples),
        "dataset_size": len(samples),
        "range_start": spec.sample_range[0] if spec.sample_range else None,
        "range_end": spec.sample_range[1] if spec.sample_range else None,
        "created_at": now or datetime.now(UTC),
    }
    return [
        ChunkTask(
            chunk_index=index,
            chunk_id=f"{spec.run_id}/chunk-{index}-of-{spec.chunks}",
            start=start,
            end=end,
            **common,
        )
        for index, (start, end) in enumerate(_split(low, high, spec.chunks))
    ]


def _selected(spec: RunSpec, name: str, size: int) -> tuple[int, int]:
    """The half-open range of sample indexes the run evaluates (as the runner selects them)."""
    if spec.sample_range is None:
        return 0, size
    start, end = spec.sample_range
    if not 0 <= start < end:
        raise WorkError(f"range must satisfy 0 <= A < B, got {start}:{end}")
    if start >= size:
        raise WorkError(f"range {start}:{end} selects no sample of the {size} samples of {name}")
    if end > size:  # refused as `run` refuses it: a clipped range would be a silent surprise
        raise WorkError(
            f"range {start}:{end} goes past the {size} samples of {name} (0:{size}): "
            f"use {start}:{size}"
        )
    return start, end


def _split(low: int, high: int, parts: int) -> list[tuple[int, int]]:
    """[low, high) cut into `parts` contiguous ranges whose sizes differ by at most one."""
    base, extra = divmod(high - low, parts)
    ranges, start = [], low
    for index in range(parts):
        end = start + base + (index < extra)
        ranges.append((start, end))
        start = end
    return ranges


def task_benchmark(task: ChunkTask) -> Benchmark:
    """The benchmark a task names, as this worker has it; WorkError if it is not the task's."""
    benchmark = load_benchmark(task.benchmark, task.limit)
    samples = benchmark.samples()
    if benchmark.name != task.benchmark_id:
        raise WorkError(
            f"benchmark {task.benchmark!r} is named {benchmark.name!r} here, "
            f"the task says {task.benchmark_id!r}"
        )
    if len(samples) != task.dataset_size or dataset_sha256(samples) != task.dataset_sha256:
        raise WorkError(
            f"benchmark {task.benchmark!r} differs on this worker ({len(samples)} samples, "
            f"sha256 {dataset_sha256(samples)[:12]}) from the submitted one "
            f"({task.dataset_size} samples, sha256 {task.dataset_sha256[:12]}): refusing the task"
        )
    return benchmark
