"""The pairs a run evaluates, the lease it holds while it does, and the error that failed it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractContextManager

from resultlog.producer.datasets import Sample
from resultlog.producer.errors import BenchmarkError, ProducerError
from resultlog.producer.lease import RunLease
from resultlog.schemas import ResultLogError, RunKey

__all__ = [
    "LeaseFactory",
    "LeaseTakenOverError",
    "first_error",
    "holding",
    "leased",
    "lost",
    "pairs",
    "select",
]

_WATCH_S = 0.2

# Claims the run key's samples [start, end) for the run's duration, or raises (a live holder).
LeaseFactory = Callable[[RunKey, tuple[int, int]], AbstractContextManager[object]]


class LeaseTakenOverError(ProducerError):
    """Another process took the run's lease over (a forced purge): the run stopped writing."""


def _holding() -> None:
    """Without a lease there is nothing to lose."""


@contextlib.asynccontextmanager
async def leased(
    lease: LeaseFactory | None, run_key: RunKey, samples: Sequence[Sample]
) -> AsyncIterator[RunLease | None]:
    """Hold the lease on the samples' range (claimed and released in threads: they block).

    When the lease is taken over, the task holding it is cancelled (see `lost`); `holding`
    gives the check a run calls before each pair, so a writer that stalled past its lease
    starts nothing more.
    """
    if lease is None:
        yield None
        return
    span = (min(s.index for s in samples), max(s.index for s in samples) + 1)
    held = await asyncio.to_thread(lease, run_key, span)
    await asyncio.to_thread(held.__enter__)
    fenced = held if isinstance(held, RunLease) else None
    watcher = asyncio.create_task(_cancel_when_lost(fenced, asyncio.current_task()))
    try:
        yield fenced
    finally:
        watcher.cancel()
        await asyncio.to_thread(held.__exit__, None, None, None)


async def _cancel_when_lost(held: RunLease | None, task: asyncio.Task[object] | None) -> None:
    """Cancel `task` once the lease is taken over: it must not write any more."""
    if held is None or task is None:
        return
    while not held.lost.is_set():
        await asyncio.sleep(_WATCH_S)
    task.cancel()


def holding(held: RunLease | None) -> Callable[[], None]:
    """The check a run calls before each pair: raises once the lease expired (RunLease.check)."""
    return held.check if held is not None else _holding


def lost(held: RunLease | None) -> LeaseTakenOverError | None:
    """The error of a run whose lease was taken over, or None while it holds it."""
    if held is None or not held.lost.is_set():
        return None
    return LeaseTakenOverError(
        f"{held.run_key}: its lease was taken over by {held.fenced_by}; stopped without "
        f"writing more"
    )


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
    if selected and end > len(samples):
        raise BenchmarkError(
            f"range {start}:{end} goes past the {len(samples)} samples of {name} "
            f"(0:{len(samples)}): use {start}:{len(samples)}"
        )
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
