"""Errors of the Inspect AI plugin."""

from __future__ import annotations

from resultlog.producer.errors import ProducerError

__all__ = ["InspectPluginError"]


class InspectPluginError(ProducerError):
    """The Inspect AI plugin cannot publish, rebuild or resume an eval."""
