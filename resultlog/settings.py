"""Settings: one frozen class read from `RESULTLOG_*` environment variables."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from resultlog._pem import PemError, check_ca, check_client_pair, common_name

__all__ = ["KafkaConfig", "Settings"]

KafkaConfig = dict[str, str | int | float | bool]

SecurityProtocol = Literal["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

_CA = "RESULTLOG_SSL_CA_LOCATION"
_CERTIFICATE = "RESULTLOG_SSL_CERTIFICATE_LOCATION"
_KEY = "RESULTLOG_SSL_KEY_LOCATION"


class Settings(BaseSettings):
    """Everything resultlog reads from the environment, validated once."""

    model_config = SettingsConfigDict(env_prefix="RESULTLOG_", frozen=True, extra="ignore")

    bootstrap_servers: str = "127.0.0.1:9092"
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    # TLS: the CA that signed the brokers' certificates; a client certificate and key for
    # mutual TLS. Checked here (exists, PEM, not expired, key private and matching).
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_password: SecretStr | None = None
    ssl_key_location: str | None = Field(default=None, validate_default=True)
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
    # The aggregator's compacted checkpoints of its fold state, so a partition assignment
    # restores one and reads only the tail of the log. A partition is checkpointed after
    # this many new records, or this many seconds after new input, and when it is revoked.
    checkpoints_topic: str = "resultlog.aggregator-checkpoints"
    checkpoint_every_records: int = Field(default=100_000, ge=1)
    checkpoint_interval_s: float = Field(default=60.0, gt=0.0, le=86_400.0)
    # The aggregator's state directory: each results partition's per-key fold state on disk
    # (RocksDB), so its memory holds only run totals and `aggregator_cache_keys` hot keys,
    # and a restart reads only the tail. None: $XDG_STATE_HOME/resultlog (else
    # ~/.local/state/resultlog).
    aggregator_state_dir: Path | None = None
    aggregator_cache_keys: int = Field(default=50_000, ge=1, le=100_000_000)
    aggregator_save_interval_s: float = Field(default=2.0, gt=0.0, le=3_600.0)

    work_topic: str = "resultlog.work"
    work_dlq_topic: str = "resultlog.work.dlq"
    work_partitions: int = Field(default=6, ge=1)
    work_group: str = "resultlog-workers"
    work_max_attempts: int = Field(default=3, ge=1, le=100)
    work_retry_backoff_s: float = Field(default=1.0, ge=0.0, le=600.0)
    work_session_timeout_ms: int = Field(default=45_000, ge=1_000)
    work_max_poll_interval_ms: int = Field(default=300_000, ge=1_000)

    http_token: SecretStr | None = Field(default=None, min_length=16)
    """With a token, the aggregator's HTTP routes but /healthz want `Bearer <token>`."""
    http_tls_certificate: str | None = None
    http_tls_key: str | None = None

    delivery_timeout_ms: int = Field(default=30_000, ge=100)
    model_max_retries: int = Field(default=3, ge=0, le=20)
    model_retry_backoff_s: float = Field(default=0.5, ge=0.0, le=60.0)
    model_timeout_s: float = Field(default=120.0, gt=0.0)

    @field_validator("ssl_ca_location")
    @classmethod
    def _ca_is_a_certificate(cls, value: str | None) -> str | None:
        if value is not None:
            _tls_file_check(lambda: check_ca(_CA, value))
        return value

    @field_validator("ssl_key_location")
    @classmethod
    def _key_matches_certificate(cls, value: str | None, info: ValidationInfo) -> str | None:
        certificate: str | None = info.data.get("ssl_certificate_location")
        if (value is None) != (certificate is None):
            _tls_file_check(_unpaired)
        if value is not None and certificate is not None:
            secret: SecretStr | None = info.data.get("ssl_key_password")
            password = secret.get_secret_value() if secret is not None else None
            _tls_file_check(
                lambda: check_client_pair(_CERTIFICATE, certificate, _KEY, value, password)
            )
        return value

    def principal(self) -> str:
        """The Kafka principal these settings log in as: User:NAME (SASL user or certificate CN)."""
        if self.security_protocol.startswith("SASL") and self.sasl_username:
            return f"User:{self.sasl_username}"
        if self.security_protocol == "SSL" and self.ssl_certificate_location is not None:
            return f"User:{common_name(self.ssl_certificate_location) or 'ANONYMOUS'}"
        return "User:ANONYMOUS"

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
        tls_files = {
            "ssl.ca.location": self.ssl_ca_location,
            "ssl.certificate.location": self.ssl_certificate_location,
            "ssl.key.location": self.ssl_key_location,
        }
        config.update({key: path for key, path in tls_files.items() if path is not None})
        if self.ssl_key_password is not None:
            config["ssl.key.password"] = self.ssl_key_password.get_secret_value()
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

    def state_dir(self) -> Path:
        """The aggregator's state directory: the setting, else the user's state directory."""
        if self.aggregator_state_dir is not None:
            return self.aggregator_state_dir
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(base) / "resultlog"

    def every_topic(self) -> list[str]:
        """Every topic these settings name, in field order."""
        return [getattr(self, name) for name in type(self).model_fields if name.endswith("_topic")]

    def namespaced(self, prefix: str) -> Settings:
        """These settings with every topic and consumer group renamed from `resultlog` to `prefix`.

        One test or benchmark then owns a whole set of topics and groups, and a topic added to
        the settings is named here without anyone writing it out again.
        """
        renamed = {
            name: prefix + str(field.default).removeprefix(_DEFAULT_PREFIX)
            for name, field in type(self).model_fields.items()
            if name.endswith(("_topic", "_group"))
        }
        return self.model_copy(update=renamed)


_DEFAULT_PREFIX = "resultlog"


def _unpaired() -> None:
    raise PemError(f"{_CERTIFICATE} and {_KEY} go together (mutual TLS): set both or neither")


def _tls_file_check(check: Callable[[], None]) -> None:
    """Run a file check; its one-line message becomes the validation error's, as it is."""
    try:
        check()
    except PemError as exc:
        raise PydanticCustomError("tls_file", "{reason}", {"reason": str(exc)}) from None
