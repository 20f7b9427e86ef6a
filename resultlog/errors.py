"""Errors of the command-line layer (settings, topics, the local broker) and the Kafka boundary."""

from __future__ import annotations

from resultlog.schemas.errors import ConfigurationError, ResultLogError

__all__ = ["BrokerError", "CliError", "KafkaClientError", "TopicError", "TopicLayoutError"]


class CliError(ResultLogError):
    """A command-line invocation that cannot be carried out."""


class BrokerError(CliError):
    """The local Kafka broker could not be fetched, started or stopped."""


class TopicError(CliError):
    """A topic could not be created or contradicts the settings."""


class KafkaClientError(ResultLogError):
    """Kafka refused or could not serve a client (unreachable, missing topic, refused login)."""


class TopicLayoutError(KafkaClientError, ConfigurationError):
    """A topic's partition count or cleanup policy contradicts the settings: refuse to use it."""
