"""Settings: one frozen class read from `RESULTLOG_*` environment variables."""

from __future__ import annotations

import difflib
import logging
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from resultlog._pem import PemError, check_ca, check_client_pair, common_name

__all__ = ["DEFAULT_BOOTSTRAP", "KafkaConfig", "Settings", "local_stack", "warn_unknown_variables"]

log = logging.getLogger(__name__)

_PREFIX = "RESULTLOG_"
# Variables of the prefix read elsewhere than Settings: the launcher, the Inspect plugin,
# the compose files' credentials, tests and benchmarks, the promptfoo example.
_READ_ELSEWHERE = frozenset(
    {
        "RESULTLOG_RUN_ID",
        "RESULTLOG_PROMPTFOO_BASE_URL",
        "RESULTLOG_PROMPTFOO_MODEL",
        "RESULTLOG_KAFKA_CACHE",
        "RESULTLOG_JAVA",
        "RESULTLOG_MAVEN_REPOSITORY",
        "RESULTLOG_PURE_PYTHON",
        "RESULTLOG_UID",
        "RESULTLOG_KAFKA_IMAGE",
        "RESULTLOG_PYTHON_IMAGE",
        "RESULTLOG_KAFKA_PORT",
        "RESULTLOG_HTTP_PORT",
        "RESULTLOG_BROKER_SECRET",
        "RESULTLOG_ADMIN_PASSWORD",
        "RESULTLOG_WORKER_PASSWORD",
        "RESULTLOG_AGGREGATOR_PASSWORD",
        "RESULTLOG_VIEWER_PASSWORD",
        "RESULTLOG_BENCH_RESULTS",
        "RESULTLOG_TEST_CHROMIUM",
        "RESULTLOG_APICURIO_HOME",
        "RESULTLOG_APICURIO_JAVA",
    }
)

KafkaConfig = dict[str, str | int | float | bool]

SecurityProtocol = Literal["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]

_CA = "RESULTLOG_SSL_CA_LOCATION"
_CERTIFICATE = "RESULTLOG_SSL_CERTIFICATE_LOCATION"
_KEY = "RESULTLOG_SSL_KEY_LOCATION"
_MIN_TOKEN = 16  # characters of RESULTLOG_HTTP_TOKEN: guessing it must be hopeless
_BOOTSTRAP = "RESULTLOG_BOOTSTRAP_SERVERS"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
# One bootstrap address: a host name, an IPv4 address or a bracketed IPv6 one, and a port.
_ADDRESS = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(?P<port>[0-9]{1,5})")


def local_stack() -> str | None:
    """The bootstrap address of the broker running in the default directory, if any.

    Found, it is said once on stderr and put in this process's environment, so that the
    processes it starts (workers, harnesses) use the same broker without saying it again.
    """
    from resultlog.broker._state import default_kafka_dir, local_bootstrap

    directory = default_kafka_dir()
    found = local_bootstrap(directory)
    if found is not None and not os.environ.get(_BOOTSTRAP):
        os.environ[_BOOTSTRAP] = found
        print(
            f"resultlog: {_BOOTSTRAP} is unset: using the local broker {found} ({directory})",
            file=sys.stderr,
        )
    return found


class Settings(BaseSettings):
    """Everything resultlog reads from the environment, validated once."""

    # Each field's docstring is its description: the settings reference of the documentation
    # is made from them (scripts/docs_hooks.py reads them from this source), and a test wants
    # one on every field.
    model_config = SettingsConfigDict(env_prefix="RESULTLOG_", frozen=True, extra="ignore")

    bootstrap_servers: str = Field(default_factory=lambda: local_stack() or DEFAULT_BOOTSTRAP)
    """Kafka's bootstrap servers, `HOST:PORT[,HOST:PORT...]`. Unset: the broker `resultlog up`
    or `resultlog kafka up` runs in the default directory (said once on stderr), else
    `127.0.0.1:9092`."""
    security_protocol: SecurityProtocol = "PLAINTEXT"
    """How clients talk to the brokers: TLS (`SSL`), SASL, both, or neither."""
    sasl_mechanism: SaslMechanism | None = None
    """The SASL mechanism, with a `SASL_*` security protocol."""
    sasl_username: str | None = None
    """The SASL user name."""
    sasl_password: SecretStr | None = None
    """The SASL password."""
    ssl_ca_location: str | None = None
    """PEM file of the CA that signed the brokers' certificates (checked when read)."""
    ssl_certificate_location: str | None = None
    """PEM client certificate for mutual TLS; goes with the key."""
    ssl_key_password: SecretStr | None = None
    """Password of an encrypted client key."""
    ssl_key_location: str | None = Field(default=None, validate_default=True)
    """PEM client key for mutual TLS: private to its owner, matching the certificate."""
    client_id: str = "resultlog"
    """The Kafka client id every client presents."""

    results_topic: str = "resultlog.sample-results"
    """The compacted topic of sample results."""
    summaries_topic: str = "resultlog.run-summaries"
    """The compacted topic of run summaries."""
    dlq_topic: str = "resultlog.sample-results.dlq"
    """The dead-letter topic of records no reader could use."""
    leases_topic: str = "resultlog.leases"
    """The compacted topic of leases on run keys."""
    spend_topic: str = "resultlog.spend"
    """The compacted spend ledger: each run key's pairs in flight and their spend, so that
    every writer of a run key (chunk workers on any machine) keeps to one budget."""
    lm_eval_answers_topic: str = "resultlog.lm-eval-answers"
    """The compacted topic of lm-eval's answered requests (`resultlog lm-eval`): one message per
    request, keyed by run key and request content and partitioned like the run key's results."""
    partitions: int = Field(default=6, ge=1)
    """Partitions of the results, summaries, dead-letter, leases, spend and changelog topics: part
    of the wire contract, never changed under existing runs."""
    replication_factor: int = Field(default=1, ge=1)
    """Replicas of every topic `topics create` makes (3 on a real cluster)."""
    min_insync_replicas: int = Field(default=1, ge=1)
    """`min.insync.replicas` of every topic `topics create` makes (2 on a real cluster)."""
    max_message_bytes: int = Field(default=8 * 1024 * 1024, ge=64 * 1024, le=512 * 1024 * 1024)
    """The largest message (after compression) `topics create` lets the results topic accept."""
    lease_ttl_s: float = Field(default=30.0, ge=1.0, le=3600.0)
    """How long a run key's lease outlives its holder's last renewal (renewed every third)."""

    schema_registry_url: str | None = None
    """A Confluent-compatible schema registry: values then use its framing."""
    schema_registry_username: str | None = None
    """The registry's basic-auth user."""
    schema_registry_password: SecretStr | None = None
    """The registry's basic-auth password."""
    schema_registry_timeout_s: float = Field(default=5.0, gt=0.0, le=300.0)
    """Timeout of one registry request, in seconds (retried within bounds)."""

    api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("RESULTLOG_API_KEY", "OPENROUTER_API_KEY")
    )
    """The model endpoint's API key."""
    aggregator_group: str = "resultlog-aggregator"
    """The aggregator's consumer group."""
    changelog_topic: str = "resultlog.aggregator-changelog"
    """The compacted changelog of the aggregator's state stores (a partition per results
    partition): each flush writes the entries it changed, so a new machine restores a store
    from it and reads only the tail of the results."""
    aggregator_state_dir: Path | None = None
    """The aggregator's state directory: each results partition's per-key fold state on disk
    (RocksDB), so a restart reads only the tail. Unset: $XDG_STATE_HOME/resultlog, else
    ~/.local/state/resultlog."""
    aggregator_cache_keys: int = Field(default=50_000, ge=1, le=100_000_000)
    """Per-key fold states held in memory across the assigned partitions (the hot ones)."""
    aggregator_store_memory_mb: int = Field(default=64, ge=8, le=1_048_576)
    """RocksDB's memory for every state store of the process: one LRU block cache (blocks,
    indexes, filters) that the memtables are charged to as well."""
    aggregator_save_interval_s: float = Field(default=2.0, gt=0.0, le=3_600.0)
    """How often pending fold state is written to the state directory."""
    aggregator_standby_replicas: int = Field(default=0, ge=0, le=1_000)
    """Standby replicas: how many other instances' partitions each aggregator instance keeps
    warm copies of (their stores, tailed from the changelog), so that a failover hands a warm
    copy over instead of restoring it."""
    index_topic: str = "resultlog.run-index"
    """The run index the aggregator keeps (compacted, partitioned like the results): where each
    run's records lie, so a reader of one run reads its records, not its whole partition."""

    work_topic: str = "resultlog.work"
    """The topic of distributed workers' chunk tasks."""
    work_dlq_topic: str = "resultlog.work.dlq"
    """The dead-letter topic of chunk tasks that kept failing."""
    work_partitions: int = Field(default=6, ge=1)
    """Partitions of the work topics: they bound how many workers are busy at once."""
    work_group: str = "resultlog-workers"
    """The workers' consumer group."""
    work_max_attempts: int = Field(default=3, ge=1, le=100)
    """Failures in a row before a chunk task is dead-lettered."""
    work_retry_backoff_s: float = Field(default=1.0, ge=0.0, le=600.0)
    """Backoff before a failed chunk is retried, doubling each time."""
    work_session_timeout_ms: int = Field(default=45_000, ge=1_000)
    """How long a dead worker's tasks wait before they move to another worker."""
    work_max_poll_interval_ms: int = Field(default=300_000, ge=1_000)
    """The longest gap between a worker's polls (not a bound on a chunk's time)."""

    http_token: SecretStr | None = None
    """With a token, the aggregator's HTTP routes but /healthz want `Bearer <token>`."""
    http_tls_certificate: str | None = None
    """PEM certificate to serve the aggregator's HTTP API over HTTPS."""
    http_tls_key: str | None = None
    """PEM key of that certificate."""

    delivery_timeout_ms: int = Field(default=30_000, ge=100)
    """How long the producer tries to deliver one record before the write counts as failed."""
    model_max_retries: int = Field(default=3, ge=0, le=20)
    """Retries of a model request that failed with 429, 5xx or a transport error."""
    model_retry_backoff_s: float = Field(default=0.5, ge=0.0, le=60.0)
    """Backoff before a model request is retried, doubling each time."""
    model_timeout_s: float = Field(default=120.0, gt=0.0)
    """Timeout of one model request, in seconds."""

    @field_validator("bootstrap_servers")
    @classmethod
    def _bootstrap_named(cls, value: str) -> str:
        """An empty list of servers would only time out: say so at once."""
        if not value.strip():
            raise PydanticCustomError(
                "empty_bootstrap",
                "RESULTLOG_BOOTSTRAP_SERVERS is empty: set it to HOST:PORT[,HOST:PORT...] "
                "(unset, it is the local stack's broker, else 127.0.0.1:9092)",
            )
        for address in value.split(","):
            match = _ADDRESS.fullmatch(address.strip())
            if match is None or not 0 < int(match["port"]) < 65536:
                raise PydanticCustomError(
                    "bad_bootstrap",
                    "RESULTLOG_BOOTSTRAP_SERVERS has {address}, not HOST:PORT "
                    "(a port of 1-65535): set it to HOST:PORT[,HOST:PORT...]",
                    {"address": repr(address.strip())},
                )
        return value

    @field_validator("api_key", mode="before")
    @classmethod
    def _blank_key_is_unset(cls, value: object) -> object:
        """An empty RESULTLOG_API_KEY does not hide OPENROUTER_API_KEY."""
        if isinstance(value, str) and not value.strip():
            return os.environ.get("OPENROUTER_API_KEY") or None
        return value

    @field_validator("http_token")
    @classmethod
    def _token_can_be_sent(cls, value: SecretStr | None) -> SecretStr | None:
        # Refused at start: a client could never send it, so every request would be a 401.
        if value is not None:
            text = value.get_secret_value()
            if text != text.strip():
                raise ValueError(
                    "RESULTLOG_HTTP_TOKEN has whitespace around it (a trailing newline from a "
                    "file?): no client sends that; strip it"
                )
            if not all(" " <= char <= "~" for char in text):
                raise ValueError(
                    "RESULTLOG_HTTP_TOKEN must be printable ASCII: browsers cannot send other "
                    "characters in a header"
                )
            if len(text) < _MIN_TOKEN:
                raise ValueError(f"RESULTLOG_HTTP_TOKEN must be at least {_MIN_TOKEN} characters")
        return value

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
        """Every topic these settings name, in the topic table's order."""
        from resultlog._topic_table import TOPICS

        return [topic.name(self) for topic in TOPICS]

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


def warn_unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """Log a WARNING for each `RESULTLOG_*` variable nothing reads (a typo); return them."""
    known = {_PREFIX + name.upper() for name in Settings.model_fields} | _READ_ELSEWHERE
    unknown = sorted(name for name in environ if name.startswith(_PREFIX) and name not in known)
    for name in unknown:
        close = difflib.get_close_matches(name, sorted(known), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        log.warning("ignoring %s: no setting has that name%s", name, hint)
    return unknown
