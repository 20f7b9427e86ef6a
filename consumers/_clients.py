"""Kafka client construction shared by readers and writers."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

__all__ = ["LIBRDKAFKA_LOGGER", "client_config"]

# librdkafka logs every failed connect attempt to stderr by default (every 50 ms while a
# broker is down); routed here, the application decides what to show.
LIBRDKAFKA_LOGGER = logging.getLogger("resultlog.librdkafka")


def client_config(base: Mapping[str, Any], **overrides: Any) -> dict[str, Any]:
    """A client configuration: the base (from settings), our logger, then the overrides."""
    return {**base, "logger": LIBRDKAFKA_LOGGER, **overrides}
