"""The root of the consumers layer's errors (see resultlog.errors for the whole tree)."""

from __future__ import annotations

from resultlog.schemas.errors import ResultLogError

__all__ = ["ConsumerError"]


class ConsumerError(ResultLogError):
    """An error of the consumers layer: reading the log (the broker, a missing topic, a
    timeout), the aggregator's state and HTTP API."""
