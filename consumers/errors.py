"""Errors of the reading side: resume, the aggregator and replay."""

from __future__ import annotations

from resultlog.schemas.errors import ResultLogError

__all__ = ["ConsumerError"]


class ConsumerError(ResultLogError):
    """Reading the log failed (the broker, a missing topic, a timeout)."""
