"""The run key: (run_id, benchmark_id, model), the identity of one evaluation run."""

from __future__ import annotations

from dataclasses import dataclass

from resultlog.schemas.errors import SchemaError


class InvalidRunKeyError(SchemaError, ValueError):
    """A run key part is empty, not a string, or not encodable as UTF-8."""


@dataclass(frozen=True, slots=True, order=True)
class RunKey:
    """Identity of one run; hashable, ordered, every part a non-empty string."""

    run_id: str
    benchmark_id: str
    model: str

    def __str__(self) -> str:
        return f"{self.run_id} / {self.benchmark_id} / {self.model}"

    def __post_init__(self) -> None:
        for name in ("run_id", "benchmark_id", "model"):
            _check_part(name, getattr(self, name))


def _check_part(name: str, value: object) -> None:
    """Reject a run key part that cannot round-trip through a Kafka key."""
    if not isinstance(value, str):
        raise InvalidRunKeyError(f"RunKey.{name} must be a str, got {type(value).__name__}")
    if not value:
        raise InvalidRunKeyError(f"RunKey.{name} must be a non-empty string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidRunKeyError(f"RunKey.{name} is not encodable as UTF-8: {exc}") from exc
