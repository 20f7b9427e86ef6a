"""A SASL_PLAINTEXT (SCRAM-SHA-512) broker: clients need credentials, which never leak."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from pydantic import SecretStr

from resultlog.broker import LocalKafka
from resultlog.errors import BrokerError
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from resultlog.topics import ensure_topics
from tests.support.aggregator import held, running
from tests.support.cli import child_env, cli_argv, run_cli
from tests.support.waiting import wait_for

# The slow tier: a SASL broker of the module's own, and brokers per test.
pytestmark = pytest.mark.slow

USER = "worker"
PASSWORD = f's3cr3t,]"{uuid.uuid4().hex}'
WRONG = f"wrong-{uuid.uuid4().hex}"
MODEL = "offline/m"
# Today a refused login surfaces as the client's own timeout (15 s for a run, 30 s for a
# reader); the bound keeps that from ever becoming a hang.
WRONG_PASSWORD_BOUND_S = 40.0


def _settings(bootstrap: str, password: str = PASSWORD, user: str = USER) -> Settings:
    name = f"sasl{uuid.uuid4().hex[:8]}"
    return Settings(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username=user,
        sasl_password=SecretStr(password),
        results_topic=f"{name}.results",
        summaries_topic=f"{name}.summaries",
        dlq_topic=f"{name}.dlq",
        aggregator_group=f"{name}.aggregator",
        partitions=2,
    )


def _cli(
    settings: Settings, password: str, *args: str, verbose: bool = False
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`resultlog ARGS` logging in with `password`, and how long it took."""
    env = child_env(settings, RESULTLOG_SASL_PASSWORD=password)
    started = time.monotonic()
    done = run_cli(env, *(["-v"] if verbose else []), *args)
    return done, time.monotonic() - started


def _run_args(run_id: str) -> list[str]:
    return ["run", "arith", "--model", MODEL, "--run-id", run_id, "--limit", "4", "--json"]


def _leaks(done: subprocess.CompletedProcess[str]) -> list[str]:
    output = done.stdout + done.stderr
    return [secret for secret in (PASSWORD, WRONG) if secret in output]


@dataclass
class SaslKafka:
    """A running SASL broker and settings with topics created on it."""

    kafka: LocalKafka
    bootstrap: str
    settings: Settings


@pytest.fixture(scope="module")
def sasl_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslKafka]:
    """A single-node SASL_PLAINTEXT broker with the user `worker` and created topics."""
    kafka = LocalKafka(tmp_path_factory.mktemp("sasl-kafka"))
    bootstrap = kafka.up(port=0, sasl_users={USER: PASSWORD})
    settings = _settings(bootstrap)
    ensure_topics(KafkaConnection(settings))
    yield SaslKafka(kafka, bootstrap, settings)
    kafka.down()


@pytest.fixture(scope="module")
def refused(sasl_kafka: SaslKafka) -> tuple[subprocess.CompletedProcess[str], float]:
    """`resultlog run` with a wrong password, and how long it took to fail."""
    return _cli(sasl_kafka.settings, WRONG, *_run_args("refused"))


def test_workers_and_readers_use_the_credentials(sasl_kafka: SaslKafka) -> None:
    settings = sasl_kafka.settings
    done, _ = _cli(settings, PASSWORD, *_run_args("sasl"), verbose=True)
    assert done.returncode == 0, done.stderr
    assert not _leaks(done)
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["records"] == 4

    key = ["--run-id", "sasl", "--benchmark", "arith", "--model", MODEL, "--json"]
    status, _ = _cli(settings, PASSWORD, "status", *key, verbose=True)
    replay, _ = _cli(settings, PASSWORD, "replay", *key, verbose=True)
    assert json.loads(status.stdout)["completed"] == 4
    assert json.loads(replay.stdout)["records"] == 4
    assert not _leaks(status) and not _leaks(replay)

    with running(settings) as aggregator:
        run_key = RunKey("sasl", "arith", MODEL)
        found = wait_for(lambda: held(aggregator, run_key), "the aggregator's summary", 30)
        assert found["records"] == 4


def test_no_anonymous_access(sasl_kafka: SaslKafka) -> None:
    anonymous = AdminClient({"bootstrap.servers": sasl_kafka.bootstrap, "log_level": 0})
    with pytest.raises(KafkaException):
        anonymous.list_topics(timeout=3)


def test_a_user_added_to_a_running_cluster_can_connect(sasl_kafka: SaslKafka) -> None:
    assert sasl_kafka.kafka.up(port=0, sasl_users={"reader": "another-secret"})
    reader = _settings(sasl_kafka.bootstrap, "another-secret", "reader")
    assert AdminClient(reader.client_config()).list_topics(timeout=10).brokers


def test_wrong_password_is_a_bounded_one_line_error(
    refused: tuple[subprocess.CompletedProcess[str], float],
) -> None:
    done, elapsed = refused
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1
    assert len(lines) == 1 and lines[0].startswith("resultlog: error:"), done.stderr
    assert elapsed < WRONG_PASSWORD_BOUND_S
    assert not _leaks(done)


def test_wrong_password_error_names_the_authentication_failure_quickly(
    refused: tuple[subprocess.CompletedProcess[str], float],
) -> None:
    done, elapsed = refused
    assert "authentication" in done.stderr.lower()
    assert elapsed < 10


def test_wrong_password_with_verbose_logging_leaks_no_secret(sasl_kafka: SaslKafka) -> None:
    done, _ = _cli(sasl_kafka.settings, WRONG, *_run_args("refused-v"), verbose=True)
    assert done.returncode == 1
    assert not _leaks(done)


def test_reprs_and_state_files_hide_the_secrets(sasl_kafka: SaslKafka) -> None:
    settings = sasl_kafka.settings
    for text in (repr(settings), str(settings), settings.model_dump_json()):
        assert PASSWORD not in text
    state = sasl_kafka.kafka.directory / "cluster.json"
    internal = json.loads(state.read_text())["internal_secret"]
    assert internal not in repr(sasl_kafka.kafka._load_state())
    for private in (state, *sasl_kafka.kafka.directory.glob("node-*/server.properties")):
        assert stat.S_IMODE(private.stat().st_mode) == 0o600, private
    for node_file in sasl_kafka.kafka.directory.rglob("*"):
        if node_file.is_file() and node_file.suffix in (".properties", ".json", ".log"):
            assert PASSWORD not in node_file.read_text(errors="replace"), node_file


def test_a_plaintext_directory_cannot_be_reused_for_sasl(kafka_dir: Path) -> None:
    kafka = LocalKafka(kafka_dir)
    kafka._prepare_state(0, 1, {})  # the state of a PLAINTEXT cluster, never started
    with pytest.raises(BrokerError, match="holds a PLAINTEXT cluster"):
        kafka.up(port=0, sasl_users={USER: PASSWORD})


@pytest.mark.parametrize(
    ("users", "message"),
    [({"a,b": "x"}, "SASL user name"), ({"resultlog-broker": "x"}, "SASL user name"),
     ({"ok": ""}, "password of ok is empty")],
)  # fmt: skip
def test_bad_sasl_users_are_refused(kafka_dir: Path, users: dict[str, str], message: str) -> None:
    with pytest.raises(BrokerError, match=message):
        LocalKafka(kafka_dir).up(port=0, sasl_users=users)


def test_cli_kafka_up_with_a_sasl_user(kafka_dir: Path) -> None:
    env = {**os.environ, "WORKER_PASSWORD": PASSWORD}
    done = subprocess.run(
        [
            *cli_argv("-v", "kafka", "up", "--port", "0"),
            *[
                "--dir",
                str(kafka_dir),
                "--sasl-user",
                USER,
                "--sasl-password-env",
                "WORKER_PASSWORD",
            ],
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert not _leaks(done)
    settings = _settings(done.stdout.strip())
    assert AdminClient(settings.client_config()).list_topics(timeout=10).brokers
