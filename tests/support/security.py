"""Helpers of the TLS and ACL fault tests: secured local clusters, their settings, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from resultlog.broker import LocalKafka
from resultlog.kafka import KafkaConnection
from resultlog.settings import Settings
from resultlog.topics import ensure_topics
from tests.support.cli import child_env

MODEL = "offline/secure"
# Leaked into any output or log, these would show a secret escaped.
SECRET_MARKERS = ("PRIVATE KEY",)


@dataclass
class Endpoint:
    """Where and how clients connect: bootstrap, protocol, the CA to trust, SASL passwords."""

    bootstrap: str
    protocol: str
    ca: str
    passwords: dict[str, str] = field(default_factory=dict)


@dataclass
class SecureCluster(Endpoint):
    """A running local cluster with some security options, and how long it took to start."""

    kafka: LocalKafka = field(kw_only=True)
    start_s: float = field(kw_only=True)


def start_cluster(
    directory: Path, *, users: Mapping[str, str] | None = None, **options: Any
) -> SecureCluster:
    """`LocalKafka.up` with `options` (tls, client_auth, authorizer, admin, brokers)."""
    kafka = LocalKafka(directory)
    started = time.monotonic()
    bootstrap = kafka.up(port=0, sasl_users=users, **options)
    elapsed = time.monotonic() - started
    tls = options.get("tls", False)
    protocol = ("SASL_" if users else "") + ("SSL" if tls else "PLAINTEXT")
    ca = str(kafka.directory / "ca.pem")
    return SecureCluster(bootstrap, protocol, ca, dict(users or {}), kafka=kafka, start_s=elapsed)


def client_settings(
    cluster: Endpoint,
    names: Settings | None = None,
    *,
    user: str | None = None,
    certificate: tuple[Path, Path] | None = None,
    **fields: Any,
) -> Settings:
    """Settings of a client of `cluster` as `user` (SASL) or by `certificate` (mutual TLS).

    Topic and group names are those of `names` (new unique ones if None).
    """
    security: dict[str, Any] = {"security_protocol": cluster.protocol}
    if cluster.protocol.endswith("SSL"):
        security["ssl_ca_location"] = cluster.ca
    if user is not None:
        security |= {
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": user,
            "sasl_password": SecretStr(cluster.passwords[user]),
        }
    if certificate is not None:
        security["ssl_certificate_location"] = str(certificate[0])
        security["ssl_key_location"] = str(certificate[1])
    return Settings(
        bootstrap_servers=cluster.bootstrap,
        **_names(names),
        **{"partitions": 2, **fields},
        **security,
    )


def _names(names: Settings | None) -> dict[str, Any]:
    if names is not None:
        keys = ("results_topic", "summaries_topic", "dlq_topic", "aggregator_group", "work_group")
        return {key: getattr(names, key) for key in keys}
    prefix = f"s{uuid.uuid4().hex[:10]}"
    return {
        "results_topic": f"{prefix}.sample-results",
        "summaries_topic": f"{prefix}.run-summaries",
        "dlq_topic": f"{prefix}.dlq",
        "aggregator_group": f"{prefix}.aggregator",
        "work_group": f"{prefix}.workers",
    }


def with_topics(settings: Settings) -> Settings:
    """The settings, once their topics exist (created with these settings' principal)."""
    ensure_topics(KafkaConnection(settings))
    return settings


# -- the command line ------------------------------------------------------------------------------


def cli(
    settings: Settings, *args: str, timeout_s: float = 180.0
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run `resultlog -v ARGS` with the settings; the process and how long it took."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "resultlog.cli", "-v", *args],
        env=child_env(settings),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    return done, time.monotonic() - started


def run_args(run_id: str, samples: int = 4, epochs: int = 2) -> list[str]:
    """`run` of the offline arith benchmark, printing its summary as JSON."""
    limits = ["--limit", str(samples), "--epochs", str(epochs), "--json"]
    return ["run", "arith", "--model", MODEL, "--run-id", run_id, *limits]


def run_key_args(run_id: str) -> list[str]:
    """--run-id, --benchmark and --model of a run made with `run_args`."""
    return ["--run-id", run_id, "--benchmark", "arith", "--model", MODEL]


def json_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The last stdout line of a successful command, as JSON."""
    assert done.returncode == 0, done.stderr
    parsed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return parsed


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a failed command (-v logging aside)."""
    assert done.returncode == 1, (done.stdout, done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("resultlog: error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def leaked(*texts: str, secrets: tuple[str, ...] = ()) -> list[str]:
    """The key markers and secrets found in `texts`."""
    joined = "\n".join(texts)
    return [marker for marker in (*SECRET_MARKERS, *secrets) if marker in joined]
