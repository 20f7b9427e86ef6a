"""Errors raised by the writers: persistence, model, solver, benchmark, lease, purge."""

from __future__ import annotations

from resultlog.schemas.errors import ResultLogError

__all__ = [
    "BenchmarkError",
    "ModelError",
    "PersistenceError",
    "ProducerError",
    "SolverError",
    "TopicRecreatedError",
    "UnansweredError",
]


class ProducerError(ResultLogError):
    """Root of every error the writers (harness worker, leases, purge) raise on purpose."""


class PersistenceError(ProducerError):
    """A result record could not be made durable; `retriable` says if trying again may help."""

    def __init__(self, message: str, *, retriable: bool = True) -> None:
        super().__init__(message)
        self.retriable = retriable


class TopicRecreatedError(PersistenceError):
    """The results topic a writer started on was deleted (or re-created) under it."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retriable=False)


class ModelError(ProducerError):
    """A model call failed; `status` is the HTTP status, or None when none was usable.

    `kind` says what failed: "http" (an error status), "timeout", "transport" (connect
    error, reset, closed connection) or "malformed" (an unusable response body).
    `retry_after` is the server's Retry-After in seconds, when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        kind: str = "http",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.kind = kind
        self.retry_after = retry_after

    def __reduce__(self) -> tuple[object, ...]:
        # Keyword-only fields would be lost by the default Exception pickling, and errors
        # cross process boundaries (worker pools, multiprocessing) in a harness.
        fields = (type(self), self.message, self.status, self.kind, self.retry_after)
        return (_rebuild_model_error, fields)

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}({self.message!r}, status={self.status!r}, kind={self.kind!r})"


def _rebuild_model_error(
    cls: type[ModelError], message: str, status: int | None, kind: str, retry_after: float | None
) -> ModelError:
    """Recreate a ModelError (or subclass) from its pickled fields."""
    return cls(message, status=status, kind=kind, retry_after=retry_after)


class SolverError(ProducerError):
    """A solver failed on a sample for a reason other than a model call."""


class BenchmarkError(ProducerError):
    """A benchmark could not be resolved or its input is invalid."""


class UnansweredError(ProducerError):
    """The model endpoint answered none of the pairs a run asked: a wrong or broken endpoint.

    `answers` says what it answered instead, e.g. `40 x HTTP 501, 2 x HTTP 429`.
    """

    def __init__(self, message: str, *, answers: str) -> None:
        super().__init__(message)
        self.answers = answers
