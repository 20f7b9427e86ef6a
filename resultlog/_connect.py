"""What every Kafka-facing command starts with: checked settings and the codec they name."""

from __future__ import annotations

from resultlog.consumers import check_login
from resultlog.schemas import Codec
from resultlog.settings import Settings

__all__ = ["codec_for", "kafka_settings"]


def kafka_settings() -> Settings:
    """The settings, after making sure a SASL login (if configured) is accepted."""
    settings = Settings()
    check_login(settings.client_config())
    return settings


def codec_for(settings: Settings) -> Codec:
    """The codec of these settings: registry framing when a registry URL is configured."""
    return Codec(settings.schema_registry_url, settings.registry_config())
