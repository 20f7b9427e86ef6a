"""Request context: the (sample_id, epoch) whose solver call is running in this task."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = ["SampleContext", "current_sample", "sample_scope"]


@dataclass(frozen=True, slots=True)
class SampleContext:
    """The identity of one (sample, epoch) evaluation, and the model calls it made."""

    sample_id: str
    epoch: int
    generation_ids: list[str] = field(default_factory=list, compare=False, repr=False)
    # The cost of every model attempt the sample made (0.0 for a failed one), in call order.
    attempt_costs: list[float] = field(default_factory=list, compare=False, repr=False)

    def add_attempt(self, cost: float) -> None:
        """Count one model attempt and what the endpoint said it cost."""
        self.attempt_costs.append(cost)

    def add_generation_id(self, generation_id: str) -> None:
        """Remember a model call's generation id (once, in call order)."""
        if generation_id not in self.generation_ids:
            self.generation_ids.append(generation_id)


# asyncio copies the context into every task it creates, so each concurrently running
# sample sees only its own value, with no locking.
_CURRENT: ContextVar[SampleContext | None] = ContextVar("resultlog_sample", default=None)


@contextmanager
def sample_scope(sample_id: str, epoch: int) -> Iterator[SampleContext]:
    """Set the current sample for the duration of the block, restoring the previous one."""
    if not isinstance(sample_id, str) or not sample_id:
        raise ValueError(f"sample_id must be a non-empty string, got {sample_id!r}")
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"epoch must be an integer >= 0, got {epoch!r}")
    ctx = SampleContext(sample_id, epoch)
    token = _CURRENT.set(ctx)
    try:
        yield ctx
    finally:
        _CURRENT.reset(token)


def current_sample() -> SampleContext | None:
    """Return the sample whose scope encloses the caller, or None outside any scope."""
    return _CURRENT.get()
