"""Errors of the command-line layer: settings, topics and the local broker."""

from __future__ import annotations

from resultlog.schemas.errors import ResultLogError

__all__ = ["BrokerError", "CliError", "TopicError"]


class CliError(ResultLogError):
    """A command-line invocation that cannot be carried out."""


class BrokerError(CliError):
    """The local Kafka broker could not be fetched, started or stopped."""


class TopicError(CliError):
    """A topic could not be created or contradicts the settings."""
