"""Errors of the lm-evaluation-harness plugin."""

from __future__ import annotations

from resultlog.producer.errors import ProducerError

__all__ = ["LmEvalBudgetError", "LmEvalError"]


class LmEvalError(ProducerError):
    """The lm-eval plugin cannot record, resume or publish an lm-eval run."""


class LmEvalBudgetError(LmEvalError):
    """A task's spend reached its budget: no further request is asked."""
