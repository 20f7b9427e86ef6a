"""The local broker launcher against a real Kafka it starts itself."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from resultlog.broker import LocalKafka
from resultlog.cli import main
from resultlog.errors import BrokerError
from resultlog.kafka import KafkaConnection
from resultlog.settings import Settings
from resultlog.topics import ensure_topics
from tests.support.cli import cli_argv


def test_up_twice_down_and_up_again_keeps_topics(kafka_dir: Path) -> None:
    kafka = LocalKafka(kafka_dir)
    bootstrap = kafka.up(port=0)
    pid_file = kafka_dir / "node-1" / "broker.pid"
    first_pid = pid_file.read_text()

    assert kafka.up(port=0) == bootstrap  # harmless: same broker, same process
    assert pid_file.read_text() == first_pid

    settings = Settings(bootstrap_servers=bootstrap, partitions=2)
    ensure_topics(KafkaConnection(settings))

    assert kafka.down() is True
    assert not pid_file.exists()
    assert kafka.down() is False

    assert kafka.up() == bootstrap  # same data dir, same port
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    assert set(settings.topic_names()) <= set(topics)
    assert len(topics[settings.results_topic].partitions) == 2


def test_port_taken_is_a_clear_error(kafka_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BrokerError, match=f"port {port} on 127.0.0.1 is already in use"):
            LocalKafka(kafka_dir).up(port=port)
    assert not (kafka_dir / "cluster.json").exists()


def test_missing_java_is_a_one_line_error(kafka_dir: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": str(tmp_path)}  # an empty PATH: no java, no mvn
    done = subprocess.run(
        cli_argv("kafka", "up", "--dir", str(kafka_dir)),
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "resultlog: error: java not found on PATH: a Java 17+ runtime is needed to run Kafka"
    ]


def test_cli_up_prints_bootstrap_and_down_stops(
    kafka_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["kafka", "up", "--port", "0", "--dir", str(kafka_dir)]) == 0
    bootstrap = capsys.readouterr().out.strip()
    host, port = bootstrap.split(":")
    assert host == "127.0.0.1" and int(port) > 0
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    assert len(metadata.brokers) == 1

    assert main(["kafka", "down", "--dir", str(kafka_dir)]) == 0
    assert capsys.readouterr().out.strip() == "stopped"
    assert not (kafka_dir / "node-1" / "broker.pid").exists()
