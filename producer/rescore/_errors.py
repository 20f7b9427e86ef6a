"""The rescore's error."""

from __future__ import annotations

from resultlog.producer.errors import ProducerError

__all__ = ["RescoreError"]


class RescoreError(ProducerError):
    """A rescore that cannot run as asked (a scorer, a source run, a target run)."""
