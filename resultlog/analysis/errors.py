"""Errors of the analysis layer: a run with nothing to read, a table that cannot be written."""

from __future__ import annotations

from resultlog.schemas.errors import ResultLogError

__all__ = ["AnalysisError"]


class AnalysisError(ResultLogError):
    """A table that cannot be built or written (an unknown run, an unwritable path)."""
