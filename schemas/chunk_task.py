"""ChunkTask: one chunk of a distributed run, as `resultlog submit` writes it to the work topic."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from resultlog.schemas._types import (
    Cost,
    Frozen,
    Index,
    NonEmptyStr,
    PositiveIndex,
    RunKeyPart,
    Timestamp,
)
from resultlog.schemas.keys import partition_for, run_key_prefix
from resultlog.schemas.runkey import RunKey, RunKeyed

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
EndpointUrl = Annotated[str, Field(pattern=r"^https?://\S+$")]
Temperature = Annotated[float, Field(ge=0.0, le=2.0, allow_inf_nan=False)]


class ChunkTask(RunKeyed, Frozen):
    """The run's identity and configuration, and the chunk's range [start, end); no secret."""

    format_version: Literal[1] = 1
    run_id: RunKeyPart
    benchmark_id: RunKeyPart
    model: RunKeyPart
    chunk_index: Index
    chunks: PositiveIndex
    chunk_id: NonEmptyStr
    start: Index
    end: PositiveIndex
    benchmark: NonEmptyStr
    dataset_sha256: Sha256
    dataset_size: PositiveIndex
    epochs: PositiveIndex
    limit: PositiveIndex | None = None
    range_start: Index | None = None
    range_end: PositiveIndex | None = None
    base_url: EndpointUrl | None = None
    degrade_solver_errors: bool = False
    temperature: Temperature | None = None
    max_tokens: PositiveIndex | None = None
    budget_usd: Cost | None = None
    max_pair_usd: Cost | None = None
    created_at: Timestamp

    @model_validator(mode="after")
    def _check_ranges(self) -> Self:
        """The chunk lies inside the run's range, which lies inside the dataset."""
        if self.chunk_index >= self.chunks:
            raise ValueError(
                f"chunk_index must be < chunks (chunk_index={self.chunk_index}, "
                f"chunks={self.chunks})"
            )
        if (self.range_start is None) != (self.range_end is None):
            raise ValueError("range_start and range_end are set together or not at all")
        low = self.range_start if self.range_start is not None else 0
        high = min(self.range_end or self.dataset_size, self.dataset_size)
        if not low <= self.start < self.end <= high:
            raise ValueError(
                f"chunk [{self.start}, {self.end}) must lie in the run's samples [{low}, {high})"
            )
        return self

    @property
    def sample_range(self) -> tuple[int, int]:
        """The chunk's half-open range of absolute sample indexes."""
        return self.start, self.end

    @property
    def key(self) -> bytes:
        """The task's Kafka key on the work topic: the run key, then the chunk index."""
        return task_key(self.run_key, self.chunk_index)

    def partition(self, num_partitions: int) -> int:
        """The task's work-topic partition: a run's chunks go round-robin from its own start."""
        return (partition_for(self.run_key, num_partitions) + self.chunk_index) % num_partitions


def task_key(run_key: RunKey, chunk_index: int) -> bytes:
    """`run_id/benchmark_id/model/chunk_index`, each run key part percent-encoded as in keys."""
    return run_key_prefix(run_key) + str(chunk_index).encode("ascii")
