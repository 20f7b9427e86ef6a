"""TLS brokers (`kafka up --tls`): every client over SSL, SASL_SSL and mutual TLS, 1 and 3 nodes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from resultlog.broker import LocalKafka
from resultlog.consumers.aggregator import Aggregator
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey
from resultlog.settings import Settings
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

USER = "worker"
PASSWORD = "tls-test-pa55word"
# The connection check diagnoses a TLS failure within about a second, plus interpreter start.
REFUSED_BOUND_S = 15.0


@pytest.fixture(scope="module", params=["SSL", "SASL_SSL"])
def single_node(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SecureCluster]:
    """One node serving TLS, with SCRAM logins for SASL_SSL."""
    users = {USER: PASSWORD} if request.param == "SASL_SSL" else None
    cluster = start_cluster(tmp_path_factory.mktemp("tls"), users=users, tls=True)
    print(f"\n{request.param} node up in {cluster.start_s:.1f}s")
    yield cluster
    cluster.kafka.down()


@pytest.fixture(scope="module")
def three_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    """Three nodes serving SASL_SSL; they replicate to each other over it."""
    directory = tmp_path_factory.mktemp("tls3")
    cluster = start_cluster(directory, users={USER: PASSWORD}, tls=True, brokers=3)
    print(f"\nSASL_SSL 3-node cluster up in {cluster.start_s:.1f}s")
    yield cluster
    cluster.kafka.down()


@pytest.fixture(scope="module")
def mutual_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    """One node whose clients must present a certificate of its CA, started by the CLI."""
    directory = tmp_path_factory.mktemp("mtls")
    up = ["kafka", "up", "--port", "0", "--dir", str(directory), "--tls"]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "resultlog.cli", *up, "--tls-client-auth", "required"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    kafka = LocalKafka(directory)
    ca = str(directory / "ca.pem")
    bootstrap = done.stdout.strip()
    yield SecureCluster(bootstrap, "SSL", ca, kafka=kafka, start_s=time.monotonic() - started)
    kafka.down()


def _user(cluster: SecureCluster) -> str | None:
    return USER if cluster.protocol == "SASL_SSL" else None


def _run_status_replay_aggregate(settings: Settings, run_id: str) -> None:
    """A full run, its status, a published replay and an aggregator, all over the settings."""
    run, _ = cli(settings, *run_args(run_id, samples=6, epochs=2))
    assert json_of(run)["records"] == 12
    status, _ = cli(settings, "status", *run_key_args(run_id), "--json")
    assert json_of(status)["completed"] == 12
    replay, _ = cli(settings, "replay", *run_key_args(run_id), "--json", "--publish")
    replayed = json_of(replay)
    assert replayed["records"] == 12
    with Aggregator(KafkaConnection(settings), publish_interval_s=0.05) as aggregator:
        run_key = RunKey(run_id, "arith", MODEL)
        found = wait_for(lambda: aggregator.lookup(run_key).summary, "the aggregator's summary")
        assert aggregator.failure is None
    assert found.records == 12 and found.accuracy == replayed["accuracy"]
    outputs = [p.stdout + p.stderr for p in (run, status, replay)]
    assert not leaked(*outputs, secrets=(PASSWORD,))


def test_a_run_its_status_replay_and_the_aggregator_over_tls(single_node: SecureCluster) -> None:
    settings = with_topics(client_settings(single_node, user=_user(single_node)))
    _run_status_replay_aggregate(settings, "tls")


def test_a_three_node_cluster_replicates_over_sasl_ssl(three_nodes: SecureCluster) -> None:
    settings = client_settings(three_nodes, user=USER, replication_factor=3, min_insync_replicas=2)
    with_topics(settings)
    metadata = KafkaConnection(settings).admin().list_topics(settings.results_topic, timeout=30)
    assert len(metadata.brokers) == 3
    partitions = metadata.topics[settings.results_topic].partitions.values()
    assert all(len(p.isrs) == 3 for p in partitions)
    _run_status_replay_aggregate(settings, "tls3")


def test_mutual_tls_with_an_issued_certificate(mutual_tls: SecureCluster) -> None:
    issue = ["kafka", "issue-cert", "--principal", "worker1"]
    issue += ["--dir", str(mutual_tls.kafka.directory)]
    issued = subprocess.run(
        [sys.executable, "-m", "resultlog.cli", *issue], capture_output=True, text=True, check=False
    )
    assert issued.returncode == 0, issued.stderr
    paths = dict(line.split("=", 1) for line in issued.stdout.splitlines())
    certificate = (
        Path(paths["RESULTLOG_SSL_CERTIFICATE_LOCATION"]),
        Path(paths["RESULTLOG_SSL_KEY_LOCATION"]),
    )
    settings = with_topics(client_settings(mutual_tls, certificate=certificate))
    assert settings.principal() == "User:worker1"
    run, _ = cli(settings, *run_args("mtls"))
    assert json_of(run)["records"] == 8
    replay, _ = cli(settings, "replay", *run_key_args("mtls"), "--json")
    assert json_of(replay)["records"] == 8


def test_a_client_without_certificate_is_refused_not_hung(mutual_tls: SecureCluster) -> None:
    with_topics(client_settings(mutual_tls, certificate=mutual_tls.kafka.issue_certificate("a")))
    anonymous = client_settings(mutual_tls)
    done, elapsed = cli(anonymous, *run_args("no-certificate"), timeout_s=REFUSED_BOUND_S + 30)
    print(f"\nrefused after {elapsed:.1f}s: {error_line(done)}")
    assert elapsed < REFUSED_BOUND_S
    assert error_line(done) == (
        f"resultlog: error: Kafka at {mutual_tls.bootstrap} requires a client certificate "
        "(mutual TLS); set RESULTLOG_SSL_CERTIFICATE_LOCATION and RESULTLOG_SSL_KEY_LOCATION"
    )


def test_tls_mistakes_are_one_line_within_seconds(
    mutual_tls: SecureCluster, tmp_path: Path
) -> None:
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_bytes(_self_signed_ca())
    certificate = mutual_tls.kafka.issue_certificate("b")
    cases = {
        "plaintext": (
            client_settings(mutual_tls).model_copy(
                update={"security_protocol": "PLAINTEXT", "ssl_ca_location": None}
            ),
            f"Kafka at {mutual_tls.bootstrap} expects TLS but the client uses PLAINTEXT",
        ),
        "unknown CA": (
            client_settings(mutual_tls, certificate=certificate).model_copy(
                update={"ssl_ca_location": str(other_ca)}
            ),
            f"TLS to Kafka at {mutual_tls.bootstrap} failed: the broker's certificate was "
            "rejected (",
        ),
    }
    for name, (settings, expected) in cases.items():
        done, elapsed = cli(settings, "status", *run_key_args("any"), timeout_s=60)
        print(f"\n{name}: {elapsed:.1f}s: {error_line(done)}")
        assert done.returncode == 1, name
        assert error_line(done).startswith(f"resultlog: error: {expected}"), name
        assert elapsed < REFUSED_BOUND_S, name


def test_a_client_certificate_from_another_ca_is_named_as_such(
    mutual_tls: SecureCluster, tmp_path: Path
) -> None:
    with_topics(client_settings(mutual_tls, certificate=mutual_tls.kafka.issue_certificate("c")))
    certificate, key = _foreign_client_certificate(tmp_path)
    foreign = client_settings(mutual_tls, certificate=(certificate, key))
    done, elapsed = cli(foreign, *run_args("foreign-ca"), timeout_s=REFUSED_BOUND_S + 30)
    print(f"\nrefused after {elapsed:.1f}s: {error_line(done)}")
    assert elapsed < REFUSED_BOUND_S
    assert error_line(done) == (
        f"resultlog: error: Kafka at {mutual_tls.bootstrap} refused the client certificate "
        f"{certificate} (mutual TLS): it was issued by CN=stranger, a CA the broker does not "
        "trust; use one its CA issued (`resultlog kafka issue-cert`) in "
        "RESULTLOG_SSL_CERTIFICATE_LOCATION"
    )


def _foreign_client_certificate(directory: Path) -> tuple[Path, Path]:
    """A valid client certificate and its private key, issued by a CA the broker never saw."""
    ca_pem, ca_key = _self_signed_ca_and_key()
    ca = x509.load_pem_x509_certificate(ca_pem)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "foreigner")]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .sign(ca_key, hashes.SHA256())
    )
    certificate_path, key_path = directory / "foreigner.pem", directory / "foreigner.key"
    certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return certificate_path, key_path


def _self_signed_ca() -> bytes:
    """A CA certificate that signed nothing the broker serves."""
    return _self_signed_ca_and_key()[0]


def _self_signed_ca_and_key() -> tuple[bytes, ec.EllipticCurvePrivateKey]:
    """A CA certificate named CN=stranger that signed nothing the broker serves, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "stranger")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key


def test_an_expired_broker_certificate_is_renewed_at_start(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "kafka", tls=True)
    try:
        cluster.kafka.down()
        directory = cluster.kafka.directory
        _expire_broker_certificate(directory)
        restarted = start_cluster(directory, tls=True)
        leaf = x509.load_pem_x509_certificates((directory / "broker.pem").read_bytes())[0]
        assert leaf.not_valid_after_utc > datetime.now(UTC) + timedelta(days=365)
        settings = client_settings(restarted)
        metadata = KafkaConnection(settings).admin().list_topics(timeout=30)
        assert len(metadata.brokers) == 1
        logs = [p.read_text(errors="replace") for p in directory.rglob("*.log")]
        assert not leaked(*logs)
    finally:
        cluster.kafka.down()


def _expire_broker_certificate(directory: Path) -> None:
    """Replace the broker's certificate by one of the same CA that expired yesterday."""
    ca_pem = (directory / "ca.pem").read_bytes()
    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key((directory / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name.from_rfc4514_string("CN=resultlog-broker"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=30))
        .not_valid_after(now - timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    keystore = directory / "broker.pem"
    keystore.write_bytes(key_pem + certificate.public_bytes(serialization.Encoding.PEM) + ca_pem)
    keystore.chmod(0o600)
