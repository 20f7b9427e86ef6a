"""Settings for a command that talks to Kafka, with the login checked first."""

from __future__ import annotations

from consumers import check_login
from resultlog.settings import Settings

__all__ = ["kafka_settings"]


def kafka_settings() -> Settings:
    """The settings, after making sure a SASL login (if configured) is accepted."""
    settings = Settings()
    check_login(settings.client_config())
    return settings
