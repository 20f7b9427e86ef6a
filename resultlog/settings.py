"""Settings: one frozen class read from `RESULTLOG_*` environment variables."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["KafkaConfig", "Settings"]

KafkaConfig = dict[str, str | int | float | bool]

SecurityProtocol = Literal["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class Settings(BaseSettings):
    """Everything resultlog reads from the environment, validated once."""

    model_config = SettingsConfigDict(env_prefix="RESULTLOG_", frozen=True, extra="ignore")

    bootstrap_servers: str = "127.0.0.1:9092"
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    client_id: str = "resultlog"

    results_topic: str = "resultlog.sample-results"
    summaries_topic: str = "resultlog.run-summaries"
    dlq_topic: str = "resultlog.sample-results.dlq"
    leases_topic: str = "resultlog.leases"
    partitions: int = Field(default=6, ge=1)
    replication_factor: int = Field(default=1, ge=1)
    min_insync_replicas: int = Field(default=1, ge=1)
    # The largest message (after compression) `topics create` lets the results topic accept.
    max_message_bytes: int = Field(default=8 * 1024 * 1024, ge=64 * 1024, le=512 * 1024 * 1024)
    # How long a run key's lease outlives its holder's last renewal (renewed every third).
    lease_ttl_s: float = Field(default=30.0, ge=1.0, le=3600.0)

    schema_registry_url: str | None = None
    schema_registry_username: str | None = None
    schema_registry_password: SecretStr | None = None
    schema_registry_timeout_s: float = Field(default=5.0, gt=0.0, le=300.0)

    api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("RESULTLOG_API_KEY", "OPENROUTER_API_KEY")
    )
    aggregator_group: str = "resultlog-aggregator"
    delivery_timeout_ms: int = Field(default=30_000, ge=100)
    model_max_retries: int = Field(default=3, ge=0, le=20)
    model_retry_backoff_s: float = Field(default=0.5, ge=0.0, le=60.0)
    model_timeout_s: float = Field(default=120.0, gt=0.0)

    def client_config(self) -> KafkaConfig:
        """The librdkafka configuration shared by every client (the one mapping to dotted keys)."""
        config: KafkaConfig = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
            "client.id": self.client_id,
        }
        if self.sasl_mechanism is not None:
            config["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_username is not None:
            config["sasl.username"] = self.sasl_username
        if self.sasl_password is not None:
            config["sasl.password"] = self.sasl_password.get_secret_value()
        return config

    def registry_config(self) -> dict[str, str | float] | None:
        """The schema registry client configuration, or None without a registry."""
        if self.schema_registry_url is None:
            return None
        config: dict[str, str | float] = {
            "url": self.schema_registry_url,
            "timeout": self.schema_registry_timeout_s,
        }
        if self.schema_registry_username and self.schema_registry_password:
            secret = self.schema_registry_password.get_secret_value()
            config["basic.auth.user.info"] = f"{self.schema_registry_username}:{secret}"
        return config

    def topic_names(self) -> tuple[str, str, str]:
        """The results, summaries and dead-letter topic names."""
        return self.results_topic, self.summaries_topic, self.dlq_topic
