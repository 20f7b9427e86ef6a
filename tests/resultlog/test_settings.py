"""Settings: environment, the librdkafka mapping and secret masking."""

from __future__ import annotations

import logging
import os

import pytest
from pydantic import ValidationError

from resultlog.settings import Settings

SECRET = "s3cr3t-pa55"


def test_env_prefix_and_librdkafka_mapping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESULTLOG_BOOTSTRAP_SERVERS", "127.0.0.1:1,127.0.0.1:2")
    monkeypatch.setenv("RESULTLOG_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("RESULTLOG_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("RESULTLOG_SASL_USERNAME", "worker")
    monkeypatch.setenv("RESULTLOG_SASL_PASSWORD", SECRET)
    settings = Settings()
    assert settings.client_config() == {
        "bootstrap.servers": "127.0.0.1:1,127.0.0.1:2",
        "security.protocol": "SASL_PLAINTEXT",
        "client.id": "resultlog",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "worker",
        "sasl.password": SECRET,
    }


def test_defaults_follow_design(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("RESULTLOG_")]:
        monkeypatch.delenv(name)
    settings = Settings()
    assert settings.topic_names() == (
        "resultlog.sample-results",
        "resultlog.run-summaries",
        "resultlog.sample-results.dlq",
    )
    assert settings.partitions == 6
    assert settings.client_config()["security.protocol"] == "PLAINTEXT"
    assert "sasl.password" not in settings.client_config()


def test_secrets_never_in_repr_str_dump_or_logs(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RESULTLOG_SASL_PASSWORD", SECRET)
    monkeypatch.setenv("RESULTLOG_SCHEMA_REGISTRY_PASSWORD", SECRET)
    monkeypatch.setenv("OPENROUTER_API_KEY", SECRET)
    settings = Settings()
    with caplog.at_level(logging.INFO):
        logging.getLogger("test").info("settings: %s %r", settings, settings)
    for text in (repr(settings), str(settings), settings.model_dump_json(), caplog.text):
        assert SECRET not in text
    assert settings.api_key is not None and settings.api_key.get_secret_value() == SECRET


def test_frozen_and_validated() -> None:
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.partitions = 3
    with pytest.raises(ValidationError, match="partitions"):
        Settings(partitions=0)
