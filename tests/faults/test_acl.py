"""ACLs (`kafka up --authorizer`, `resultlog acl grant`): each role does its job and no more.

A denied action is one line naming the principal, the operation and the resource.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from resultlog.acl import Role, grant, role_acls
from resultlog.consumers import SummaryPublisher, read_run_records
from resultlog.consumers.aggregator import Aggregator
from resultlog.kafka import KafkaClientError, KafkaConnection
from resultlog.producer import KafkaResultStore, PersistenceError
from resultlog.producer.offline import Behavior, ModelServer
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from resultlog.topics import TopicSpec, ensure_topics
from tests.support.records import make_record
from tests.support.security import (
    MODEL,
    SecureCluster,
    cli,
    client_settings,
    error_line,
    json_of,
    leaked,
    run_args,
    run_key_args,
    start_cluster,
    with_topics,
)
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

ROLES = ("worker", "aggregator", "viewer")
PASSWORDS = {name: f"{name}-acl-pa55" for name in ("admin", *ROLES, "nobody", "blind")}
DENIAL_BOUND_S = 10.0  # a whole CLI process, start-up included
RUN_ID = "acl"


@dataclass
class Principals:
    """Settings of the admin and of each role's principal, on one set of topics."""

    cluster: SecureCluster
    admin: Settings
    worker: Settings
    aggregator: Settings
    viewer: Settings
    nobody: Settings
    blind: Settings


@pytest.fixture(scope="module")
def principals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Principals]:
    """A SASL_SSL node with the StandardAuthorizer, topics made by the admin, roles granted."""
    cluster = start_cluster(
        tmp_path_factory.mktemp("acl"), users=PASSWORDS, tls=True, authorizer=True, admin="admin"
    )
    print(f"\nSASL_SSL node with the authorizer up in {cluster.start_s:.1f}s")
    admin = with_topics(client_settings(cluster, user="admin"))
    found = {
        name: client_settings(cluster, admin, user=name) for name in (*ROLES, "nobody", "blind")
    }
    for role in ROLES:
        for _ in range(2):  # granting again changes nothing
            done, _ = cli(admin, "acl", "grant", "--role", role, "--principal", f"User:{role}")
            assert done.returncode == 0, done.stderr
            assert f"granted: User:{role} may" in done.stdout
    # A worker as granted before roles included topic configurations: it cannot read a limit.
    blind = role_acls(admin, Role.WORKER, "User:blind")
    grant(KafkaConnection(admin), [acl for acl in blind if acl.operation != "DESCRIBE_CONFIGS"])
    time.sleep(1)  # ACLs reach the broker's authorizer within a second
    yield Principals(cluster, admin, **found)
    cluster.kafka.down()


@pytest.fixture(scope="module")
def worker_run(principals: Principals) -> dict[str, object]:
    """A run of the worker principal, with its summary."""
    done, _ = cli(principals.worker, *run_args(RUN_ID, samples=4, epochs=2))
    return json_of(done)


def _denial(line: str, principal: str, operation: str, topic: str) -> None:
    expected = f"Kafka denied User:{principal} {operation} on topic {topic}"
    assert expected in line and "TOPIC_AUTHORIZATION_FAILED" in line, line


def test_a_worker_runs_resumes_and_replays(
    principals: Principals, worker_run: dict[str, object]
) -> None:
    assert worker_run["records"] == 8
    again, _ = cli(principals.worker, *run_args(RUN_ID, samples=4, epochs=2))
    assert json_of(again)["records"] == 8
    assert "resume read failed" not in again.stderr  # it read its own results back
    status, _ = cli(principals.worker, "status", *run_key_args(RUN_ID), "--json")
    assert json_of(status)["completed"] == 8
    replay, _ = cli(principals.worker, "replay", *run_key_args(RUN_ID), "--json")
    assert json_of(replay)["records"] == 8
    assert not leaked(again.stderr, status.stderr, secrets=tuple(PASSWORDS.values()))


def test_a_worker_checks_its_topics_and_warns_of_nothing(
    principals: Principals, worker_run: dict[str, object]
) -> None:
    done, _ = cli(principals.worker, "status", *run_key_args(RUN_ID), "--json")
    assert json_of(done)["completed"] == 8
    assert "cannot" not in done.stderr and "assuming" not in done.stderr, done.stderr


def test_a_worker_stores_a_large_answer_whole_and_reads_it_back(principals: Principals) -> None:
    """A 1.5 MB answer that compresses to more than Kafka's default 1 MB limit is kept whole."""
    answer = base64.b64encode(os.urandom(1_100_000)).decode()  # 1.47 MB, ~1.1 MB compressed
    assert len(zlib.compress(answer.encode(), 1)) > 1_048_588
    with ModelServer(error_rate=0, wrong_rate=0) as server:
        server.override("arith-0000", 0, Behavior(answer=answer))
        args = ["run", "arith", "--model", MODEL, "--run-id", "large", "--limit", "1", "--json"]
        done, _ = cli(principals.worker, *args, "--base-url", server.base_url)
    assert json_of(done)["records"] == 1
    assert "reduced" not in done.stderr and "cannot" not in done.stderr, done.stderr
    stored = read_run_records(KafkaConnection(principals.worker), RunKey("large", "arith", MODEL))
    (record,) = stored.records
    assert record.truncated is None
    assert [m.content for m in record.messages if m.role == "assistant"] == [answer]


def test_a_principal_that_cannot_read_the_limit_refuses_to_write(principals: Principals) -> None:
    blind = principals.blind
    done, _ = cli(blind, *run_args("blind"))
    line = error_line(done)
    expected = f"Kafka denied User:blind DESCRIBE_CONFIGS on topic {blind.results_topic}"
    assert expected in line and "TOPIC_AUTHORIZATION_FAILED" in line, line
    with pytest.raises(PersistenceError, match=expected) as caught:
        KafkaResultStore(KafkaConnection(blind))
    assert not caught.value.retriable
    status, _ = cli(principals.admin, "status", *run_key_args("blind"), "--json")
    assert "has no records" in error_line(status)  # nothing written, nothing cut


def test_a_worker_refuses_a_results_topic_that_deletes(principals: Principals) -> None:
    """The cleanup-policy check runs for a worker: a deleting topic would lose results."""
    admin = principals.admin
    deleting = admin.model_copy(update={"results_topic": f"{admin.results_topic}-deleting"})
    spec = TopicSpec(deleting.results_topic, deleting.partitions, 1, {"cleanup.policy": "delete"})
    ensure_topics(KafkaConnection(deleting), [spec])
    grant(KafkaConnection(admin), role_acls(deleting, Role.WORKER, "User:worker"))
    time.sleep(1)
    worker = principals.worker.model_copy(update={"results_topic": deleting.results_topic})
    done, _ = cli(worker, *run_args("deleting"))
    assert (
        f"topic {deleting.results_topic} has cleanup.policy=delete but resultlog needs compact"
        in error_line(done)
    )


def test_a_worker_cannot_write_summaries(
    principals: Principals, worker_run: dict[str, object]
) -> None:
    worker = principals.worker
    done, elapsed = cli(worker, "replay", *run_key_args(RUN_ID), "--json", "--publish")
    _denial(error_line(done), "worker", "DESCRIBE", worker.summaries_topic)
    assert elapsed < DENIAL_BOUND_S
    with pytest.raises(KafkaClientError, match="Kafka denied User:worker DESCRIBE on topic"):
        SummaryPublisher(KafkaConnection(worker))


def test_a_viewer_cannot_write_results(principals: Principals) -> None:
    viewer = principals.viewer
    done, elapsed = cli(viewer, *run_args("viewer-run"))
    _denial(error_line(done), "viewer", "DESCRIBE", viewer.results_topic)
    assert elapsed < DENIAL_BOUND_S
    with pytest.raises(PersistenceError, match="Kafka denied User:viewer DESCRIBE on topic"):
        KafkaResultStore(KafkaConnection(viewer))


async def test_a_denied_write_names_the_write_and_is_not_retried(principals: Principals) -> None:
    aggregator = principals.aggregator  # it may read results, so it sees the topic
    store = KafkaResultStore(KafkaConnection(aggregator))
    record = make_record(0, 0, run_key=RunKey("denied", "arith", MODEL))
    started = time.monotonic()
    try:
        with pytest.raises(PersistenceError) as caught:
            await store.write(record)
    finally:
        await store.close()
    assert not caught.value.retriable
    _denial(str(caught.value), "aggregator", "WRITE", aggregator.results_topic)
    assert time.monotonic() - started < 5


def test_the_aggregator_folds_publishes_and_dead_letters_and_a_viewer_reads_summaries(
    principals: Principals, worker_run: dict[str, object]
) -> None:
    poison = Producer(principals.worker.client_config() | {"log_level": 0})
    poison.produce(principals.worker.results_topic, key=b"not a key", value=b"\x00junk")
    assert poison.flush(15) == 0
    run_key = RunKey(RUN_ID, "arith", MODEL)
    with Aggregator(KafkaConnection(principals.aggregator), publish_interval_s=0.05) as service:
        found = wait_for(lambda: service.lookup(run_key).summary, "the aggregator's summary")
        assert service.failure is None
        assert found.records == worker_run["records"]
        dead = wait_for(lambda: _messages(principals.admin, principals.admin.dlq_topic), "a DLQ")
        assert dead[0][0] == b"not a key"
    published = wait_for(
        lambda: _messages(principals.viewer, principals.viewer.summaries_topic),
        "the viewer to read the published summary",
    )
    assert any(value is not None and RUN_ID.encode() in (key or b"") for key, value in published)


def test_a_principal_without_grants_sees_nothing(principals: Principals) -> None:
    nobody = principals.nobody
    done, _ = cli(nobody, "status", *run_key_args(RUN_ID), "--json")
    _denial(error_line(done), "nobody", "DESCRIBE", nobody.results_topic)


def test_only_the_admin_manages_acls(principals: Principals) -> None:
    grant = ["acl", "grant", "--role", "worker", "--principal", "User:nobody"]
    done, elapsed = cli(principals.worker, *grant)
    line = error_line(done)
    assert "Kafka denied User:worker ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED)" in line
    assert "only a super user may manage ACLs" in line and len(line) < 200
    assert elapsed < DENIAL_BOUND_S


def test_list_and_revoke(principals: Principals) -> None:
    admin, viewer = principals.admin, principals.viewer
    listed, _ = cli(admin, "acl", "list", "--principal", "User:viewer")
    assert listed.stdout.splitlines() == [
        "User:viewer may DESCRIBE group resultlog-reader-* (prefix)",
        f"User:viewer may DESCRIBE_CONFIGS topic {viewer.summaries_topic}",
        f"User:viewer may READ topic {viewer.summaries_topic}",
    ]
    revoke = ["acl", "revoke", "--role", "viewer", "--principal", "User:viewer"]
    revoked, _ = cli(admin, *revoke)
    assert revoked.stdout.strip() == "revoked 3 ACL(s) of role viewer from User:viewer"
    try:
        time.sleep(1)
        with pytest.raises(KafkaClientError, match="Kafka denied User:viewer DESCRIBE"):
            KafkaConnection(viewer).partition_count(viewer.summaries_topic)
    finally:
        cli(admin, "acl", "grant", "--role", "viewer", "--principal", "User:viewer")
        time.sleep(1)


def test_certificate_principals_with_mutual_tls(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cluster = start_cluster(
        tmp_path_factory.mktemp("acl-mtls"), tls=True, client_auth=True, authorizer=True
    )
    try:
        clients = cluster.kafka.directory / "clients"
        admin_certificate = (clients / "admin.pem", clients / "admin.key")  # made at creation
        admin = with_topics(client_settings(cluster, certificate=admin_certificate))
        worker = client_settings(cluster, admin, certificate=cluster.kafka.issue_certificate("w1"))
        granted, _ = cli(admin, "acl", "grant", "--role", "worker", "--principal", "User:w1")
        assert granted.returncode == 0, granted.stderr
        time.sleep(1)
        assert json_of(cli(worker, *run_args("mtls-acl"))[0])["records"] == 8
        done, _ = cli(worker, "replay", *run_key_args("mtls-acl"), "--publish")
        _denial(error_line(done), "w1", "DESCRIBE", worker.summaries_topic)
    finally:
        cluster.kafka.down()


def _messages(settings: Settings, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    """Every message of a topic, read as the settings' principal with the reader's group."""
    consumer: Consumer = KafkaConnection(settings).reader()
    try:
        partitions = range(settings.partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        found: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            error = message.error()
            assert error is None or error.code() == KafkaError._PARTITION_EOF, error
            if error is None:
                found.append((message.key(), message.value()))
        return found
    finally:
        consumer.close()


def test_every_denied_write_in_a_row_is_the_same_line(principals: Principals) -> None:
    """After a denied delivery librdkafka refuses the next messages at once: same one line."""

    async def writes() -> list[PersistenceError]:
        store = KafkaResultStore(KafkaConnection(principals.aggregator))
        denied: list[PersistenceError] = []
        try:
            for index in range(5):
                record = make_record(index, 0, run_key=RunKey("loop", "arith", MODEL))
                try:
                    await store.write(record)
                except PersistenceError as exc:
                    denied.append(exc)
        finally:
            await store.close()
        return denied

    started = time.monotonic()
    denied = asyncio.run(writes())
    assert time.monotonic() - started < 10
    assert len(denied) == 5 and not any(exc.retriable for exc in denied)
    for exc in denied:
        _denial(str(exc), "aggregator", "WRITE", principals.aggregator.results_topic)
