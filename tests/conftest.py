"""Shared fixtures: one real Kafka broker per session, unique topics per test."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import hypothesis
import pytest
from confluent_kafka.admin import AdminClient

import resultlog
from resultlog.broker import KAFKA_VERSION, LocalKafka, free_port
from resultlog.kafka import KafkaConnection
from resultlog.producer.model_client import ModelClient
from resultlog.producer.offline import ModelServer
from resultlog.producer.store import KafkaResultStore
from resultlog.settings import Settings
from tests.support.cli import child_env
from tests.support.idlist import (
    COLLECTED,
    LISTED,
    MIN_TESTS,
    allowed_skips,
    listed_ids,
    lost_ids,
    merged_ids,
    unexplained_skips,
)
from tests.support.kafka import drop_topics, topic_settings
from tests.support.work import start_worker

# Property tests assert outcomes, never speed: a loaded CI machine must not fail them on
# Hypothesis's per-example deadline (200 ms by default).
hypothesis.settings.register_profile("resultlog", deadline=None)
hypothesis.settings.load_profile("resultlog")

if TYPE_CHECKING:
    from testcontainers.core.container import DockerContainer

# The container path's broker image: RESULTLOG_KAFKA_IMAGE (as the compose files take it, e.g.
# scripts/images.sh's stand-in), else the official one.
KAFKA_IMAGE = os.environ.get("RESULTLOG_KAFKA_IMAGE") or f"apache/kafka:{KAFKA_VERSION}"


def _docker_answers() -> bool:
    try:
        import docker

        docker.from_env(timeout=2).ping()
    except Exception:  # any failure means there is no usable engine
        return False
    return True


def _kafka_container() -> tuple[str, DockerContainer]:
    """Start KAFKA_IMAGE (KRaft) with its listener on a host port."""
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    port = free_port()
    container = (
        DockerContainer(KAFKA_IMAGE)
        .with_bind_ports(port, port)
        .with_env("KAFKA_NODE_ID", "1")
        .with_env("KAFKA_PROCESS_ROLES", "broker,controller")
        .with_env("KAFKA_LISTENERS", f"PLAINTEXT://0.0.0.0:{port},CONTROLLER://0.0.0.0:9093")
        .with_env("KAFKA_ADVERTISED_LISTENERS", f"PLAINTEXT://127.0.0.1:{port}")
        .with_env("KAFKA_CONTROLLER_LISTENER_NAMES", "CONTROLLER")
        .with_env("KAFKA_CONTROLLER_QUORUM_VOTERS", "1@localhost:9093")
        .with_env("KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR", "1")
        .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
        .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
        .with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
        .with_env("KAFKA_LOG_CLEANER_BACKOFF_MS", "1000")
        .with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "false")
    )
    container.start()
    wait_for_logs(container, "Kafka Server started", timeout=300)
    return f"127.0.0.1:{port}", container


@pytest.fixture(scope="session", autouse=True)
def _no_local_stack() -> Iterator[None]:
    """No test finds a developer's own `resultlog up` (used when the variable is unset)."""
    # A short path without hyphens: help texts wrap at hyphens, and tests read paths in them.
    with tempfile.TemporaryDirectory(prefix="xdg") as state, pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", state)
        yield


def _start_broker(directory: Path) -> tuple[str, Callable[[], object]]:
    """A real broker and how to stop it: testcontainers where Docker answers, else our
    launcher in `directory`."""
    if _docker_answers():
        bootstrap, container = _kafka_container()
        return bootstrap, container.stop
    kafka = LocalKafka(directory)
    return kafka.up(port=0), kafka.down


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, one broker for every worker: the controller starts it (unless
    RESULTLOG_BOOTSTRAP_SERVERS names one) and hands it on in the workers' environment."""
    workers = getattr(config.option, "numprocesses", None)
    if not workers or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if os.environ.get("RESULTLOG_BOOTSTRAP_SERVERS") or config.option.collectonly:
        return
    directory = Path(tempfile.mkdtemp(prefix="resultlog-test-kafka-"))
    bootstrap, stop = _start_broker(directory)
    os.environ["RESULTLOG_BOOTSTRAP_SERVERS"] = bootstrap

    def cleanup() -> None:
        del os.environ["RESULTLOG_BOOTSTRAP_SERVERS"]
        stop()
        shutil.rmtree(directory, ignore_errors=True)

    config.add_cleanup(cleanup)


@pytest.fixture(scope="session")
def kafka_bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real broker: RESULTLOG_BOOTSTRAP_SERVERS, else testcontainers, else our launcher."""
    configured = os.environ.get("RESULTLOG_BOOTSTRAP_SERVERS")
    if configured:
        yield configured
        return
    bootstrap, stop = _start_broker(tmp_path_factory.mktemp("kafka"))
    yield bootstrap
    stop()


@pytest.fixture(scope="session")
def admin(kafka_bootstrap: str) -> AdminClient:
    """An AdminClient on the session broker."""
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def unique_name() -> str:
    """A name no other test uses, for topics and consumer groups."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def settings(kafka_bootstrap: str, unique_name: str) -> Iterator[Settings]:
    """Settings pointing at the session broker, with this test's own topics (deleted after)."""
    made = topic_settings(kafka_bootstrap, unique_name)
    yield made
    drop_topics(made)


@pytest.fixture
def kafka(settings: Settings) -> Iterator[KafkaConnection]:
    """A connection to the session broker with this test's topics."""
    with KafkaConnection(settings) as connection:
        yield connection


@pytest.fixture
def kafka_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory for a test's own launcher-started broker, stopped at the end."""
    directory = tmp_path / "kafka"
    yield directory
    LocalKafka(directory).down()


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    """The embedded offline model server on an OS-chosen port."""
    with ModelServer(latency_s=0.002) as server:
        yield server


@pytest.fixture
async def model_client(model_server: ModelServer) -> AsyncIterator[ModelClient]:
    """A model client for the offline server with tiny backoffs, so degraded pairs are quick."""
    async with ModelClient(model_server.base_url, max_retries=1, backoff_initial=0.01) as client:
        yield client


@pytest.fixture
async def kafka_store(settings: Settings) -> AsyncIterator[KafkaResultStore]:
    """A Kafka result store on this test's results topic, delivery timing out after 10 s."""
    store = KafkaResultStore(
        KafkaConnection(settings.model_copy(update={"delivery_timeout_ms": 10_000}))
    )
    yield store
    await store.close()


@pytest.fixture
def cli_env(settings: Settings) -> dict[str, str]:
    """The environment of a `resultlog` child process using this test's broker and topics."""
    return child_env(settings)


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """start_worker, with every worker a failing test leaves behind killed at teardown."""
    started: list[subprocess.Popen[str]] = []

    def start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
        started.append(start_worker(env, *args))
        return started[-1]

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)


def pytest_report_header() -> str:
    """The fold path this run tests (tests/resultlog/test_fold_path.py runs the twins too)."""
    return f"fold path: {resultlog.fold_path()}"


# Every skipped test of this process and its reason (under xdist, the controller's: it sees
# every worker's reports).
_SKIPPED: dict[str, str] = {}
_UNEXPLAINED = pytest.StashKey[list[str]]()


def _collects_everything(config: pytest.Config) -> bool:
    """Whether this run collects every test file (markers and -k only deselect afterwards)."""
    return (
        config.args_source is pytest.Config.ArgsSource.TESTPATHS
        and not config.getoption("ignore")
        and not config.getoption("ignore_glob")
        and not config.getoption("lf", False)
        and not config.getoption("sw", False)
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Before any deselection: every test of tests/test_ids.txt is still collected (or merged
    into a collected one, tests/merged_tests.txt), and all tiers hold at least MIN_TESTS."""
    if not _collects_everything(config):
        return
    collected = [item.nodeid for item in items]
    config.stash[COLLECTED] = collected
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # a worker cannot stop the run: tests/test_suite.py fails instead
    lost = lost_ids(collected, listed_ids(), merged_ids())
    if len(collected) < MIN_TESTS:
        lost.append(f"all tiers collect {len(collected)} tests, fewer than {MIN_TESTS}")
    if lost:
        pytest.exit(
            f"{len(lost)} test(s) of {LISTED.name} lost (map a merged or renamed test in "
            "merged_tests.txt):\n  " + "\n  ".join(lost),
            returncode=pytest.ExitCode.TESTS_FAILED,
        )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Note every skipped test and its reason (xfails are not skips)."""
    if report.skipped and not hasattr(report, "wasxfail") and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        _SKIPPED.setdefault(report.nodeid, reason)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """In CI (CI=true), a skip tests/skips.txt does not list fails the run."""
    config = session.config
    if os.environ.get("CI") != "true" or hasattr(config, "workerinput"):
        return
    unexplained = unexplained_skips(_SKIPPED, allowed_skips())
    config.stash[_UNEXPLAINED] = unexplained
    if unexplained and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the skips CI does not allow (tests/skips.txt lists the allowed ones)."""
    unexplained = terminalreporter.config.stash.get(_UNEXPLAINED, [])
    if unexplained:
        terminalreporter.section("skips tests/skips.txt does not allow (CI=true)", red=True)
        for line in unexplained:
            terminalreporter.line(line)
