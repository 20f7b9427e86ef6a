"""A benchmark cut to its first N samples (`resultlog run --limit N`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from resultlog.producer._scorers import Scored
from resultlog.producer.benchmarks import Benchmark, Sample

__all__ = ["limit_samples"]


@dataclass(frozen=True)
class _Limited:
    """The first `limit` samples of a benchmark; its dataset is those samples."""

    inner: Benchmark
    limit: int

    @property
    def name(self) -> str:
        """The inner benchmark's name: a limited run is still a run of that benchmark."""
        return self.inner.name

    def samples(self) -> Sequence[Sample]:
        """The first `limit` samples."""
        return self.inner.samples()[: self.limit]

    def messages(self, sample: Sample) -> list[dict[str, Any]]:
        """The inner benchmark's prompt."""
        return self.inner.messages(sample)

    def score(self, sample: Sample, completion_text: str) -> Scored:
        """The inner benchmark's scorer."""
        return self.inner.score(sample, completion_text)


def limit_samples(benchmark: Benchmark, limit: int) -> Benchmark:
    """The benchmark restricted to its first `limit` samples."""
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    return _Limited(benchmark, limit)
