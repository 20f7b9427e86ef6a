"""Kafka client construction shared by readers and writers."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from resultlog.consumers.errors import ConsumerError

__all__ = ["LIBRDKAFKA_LOGGER", "check_login", "client_config"]

# librdkafka logs every failed connect attempt to stderr by default (every 50 ms while a
# broker is down); routed here, the application decides what to show.
LIBRDKAFKA_LOGGER = logging.getLogger("resultlog.librdkafka")


def client_config(base: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """A client configuration: the base (from settings), our logger, then the overrides."""
    return {**base, "logger": LIBRDKAFKA_LOGGER, **overrides}


def check_login(config: Mapping[str, Any], timeout_s: float = 15.0) -> None:
    """With SASL configured, fail at once and say so when the broker refuses the login."""
    if not str(config.get("security.protocol", "")).upper().startswith("SASL"):
        return
    # librdkafka reports a refused login only to error_cb (served by poll), while metadata
    # calls just time out as "transport failure": poll for the refusal.
    refused: list[KafkaError] = []
    producer = Producer(client_config(config, error_cb=refused.append))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        producer.poll(0.1)
        if any(error.code() == KafkaError._AUTHENTICATION for error in refused):
            raise ConsumerError(
                f"Kafka at {config.get('bootstrap.servers')} refused the login of "
                f"{config.get('sasl.username')!r} ({config.get('sasl.mechanism')}): "
                "authentication failed; check RESULTLOG_SASL_USERNAME/RESULTLOG_SASL_PASSWORD"
            )
        try:
            producer.list_topics(timeout=0.2)
            return
        except KafkaException:
            continue
