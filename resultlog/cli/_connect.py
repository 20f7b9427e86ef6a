"""What every Kafka-facing command starts with: a connection from checked settings."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from resultlog.kafka import KafkaConnection

__all__ = ["connect"]


def connect() -> KafkaConnection:
    """The connection the environment's settings name, once Kafka answered and accepted the
    login (if any): an unreachable broker is one line within seconds, for every command.

    Use it as a context manager: leaving closes the codec's schema-registry client.
    """
    from resultlog.kafka import KafkaConnection
    from resultlog.settings import Settings

    kafka = KafkaConnection(Settings())
    try:
        kafka.check_connection()
    except BaseException:
        kafka.close()
        raise
    return kafka
