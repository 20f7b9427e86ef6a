"""The pairs a run evaluates, the lease it holds while it does, and the error that failed it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractContextManager

from resultlog.producer.datasets import Sample
from resultlog.producer.errors import BenchmarkError
from resultlog.schemas import ResultLogError, RunKey

__all__ = ["LeaseFactory", "first_error", "leased", "pairs", "select"]

# Claims the run key's samples [start, end) for the run's duration, or raises (a live holder).
LeaseFactory = Callable[[RunKey, tuple[int, int]], AbstractContextManager[object]]


def _holding() -> None:
    """Without a lease there is nothing to lose."""


@contextlib.asynccontextmanager
async def leased(
    lease: LeaseFactory | None, run_key: RunKey, samples: Sequence[Sample]
) -> AsyncIterator[Callable[[], None]]:
    """Hold the lease on the samples' range (claimed and released in threads: they block).

    Yields a check that raises once the lease is lost (see RunLease.check): a run calls it
    before each pair it starts, so a writer that stalled past its lease starts nothing more.
    """
    if lease is None:
        yield _holding
        return
    span = (min(s.index for s in samples), max(s.index for s in samples) + 1)
    held = await asyncio.to_thread(lease, run_key, span)
    await asyncio.to_thread(held.__enter__)
    try:
        yield getattr(held, "check", _holding)
    finally:
        await asyncio.to_thread(held.__exit__, None, None, None)


def select(
    samples: Sequence[Sample], sample_range: tuple[int, int] | None, name: str
) -> list[Sample]:
    """The samples of the range; a range (or a dataset) with none is an error, not a no-op."""
    if sample_range is None:
        if not samples:
            raise BenchmarkError(f"benchmark {name} has no samples")
        return list(samples)
    start, end = sample_range
    if not 0 <= start < end:
        raise ValueError(f"sample range must satisfy 0 <= start < end, got {start}:{end}")
    selected = [sample for sample in samples if start <= sample.index < end]
    if not selected:
        raise BenchmarkError(
            f"range {start}:{end} selects no sample of {name}, whose {len(samples)} samples "
            f"are 0:{len(samples)}"
        )
    return selected


def pairs(samples: Sequence[Sample], epochs: int) -> Iterator[tuple[Sample, int]]:
    """The sample stream with epoch as the inner loop."""
    for sample in samples:
        for epoch in range(epochs):
            yield sample, epoch


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error that failed the run, preferring our own over cancellations."""
    leaves: list[BaseException] = []

    def collect(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                collect(inner)
        else:
            leaves.append(error)

    collect(group)
    ours = [error for error in leaves if isinstance(error, ResultLogError)]
    return (ours or leaves)[0]
