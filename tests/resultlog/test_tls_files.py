"""TLS files: what `kafka up --tls` writes, and the one-line checks of RESULTLOG_SSL_* settings."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import SecretStr, ValidationError

from resultlog.broker import LocalKafka, ensure_tls_files
from resultlog.errors import BrokerError
from resultlog.settings import Settings

CA = "RESULTLOG_SSL_CA_LOCATION"
CERTIFICATE = "RESULTLOG_SSL_CERTIFICATE_LOCATION"
KEY = "RESULTLOG_SSL_KEY_LOCATION"
KEY_PASSWORD = "k3y-pa55-for-tests"


@pytest.fixture
def tls_dir(tmp_path: Path) -> Path:
    """A cluster directory holding a CA and a broker keystore (no broker)."""
    directory = tmp_path / "kafka"
    ensure_tls_files(directory)
    return directory


@pytest.fixture
def client(tls_dir: Path) -> tuple[Path, Path]:
    """A client certificate and key for User:worker1."""
    return LocalKafka(tls_dir).issue_certificate("User:worker1")


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _certificates(path: Path) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(path.read_bytes())


def _signed_by_ca(
    tls_dir: Path, common_name: str, *, days: int, key: ec.EllipticCurvePrivateKey | None = None
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate of the directory's CA valid until `days` from now (negative: expired)."""
    ca_certificate = _certificates(tls_dir / "ca.pem")[0]
    ca_key = serialization.load_pem_private_key((tls_dir / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = key or ec.generate_private_key(ec.SECP256R1())
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca_certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=30))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return certificate, key


def _pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = serialization.NoEncryption()
    if password is not None:
        encryption = serialization.BestAvailableEncryption(password.encode())
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def _write_key(path: Path, data: bytes, mode: int = 0o600) -> Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


def _one_line_error(**fields: object) -> str:
    with pytest.raises(ValidationError) as caught:
        Settings(**fields)  # type: ignore[arg-type]
    errors = caught.value.errors()
    assert len(errors) == 1
    message = str(errors[0]["msg"])
    assert "\n" not in message
    return message


# -- what the launcher writes --------------------------------------------------------------------


def test_the_ca_and_the_broker_keystore_are_written_with_private_keys(tls_dir: Path) -> None:
    assert _mode(tls_dir / "ca.pem") == 0o644
    assert _mode(tls_dir / "ca.key") == 0o600
    assert _mode(tls_dir / "broker.pem") == 0o600
    keystore = (tls_dir / "broker.pem").read_text()
    assert keystore.count("BEGIN PRIVATE KEY") == 1 and "ENCRYPTED" not in keystore
    leaf, ca = _certificates(tls_dir / "broker.pem")
    assert ca == _certificates(tls_dir / "ca.pem")[0]
    assert leaf.issuer == ca.subject
    assert leaf.subject.rfc4514_string() == "CN=resultlog-broker"
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert leaf.not_valid_after_utc > datetime.now(UTC) + timedelta(days=365)


def test_making_them_again_changes_nothing_unless_asked_for_a_new_hostname(tls_dir: Path) -> None:
    before = (tls_dir / "broker.pem").read_bytes()
    ensure_tls_files(tls_dir)
    assert (tls_dir / "broker.pem").read_bytes() == before
    ensure_tls_files(tls_dir, ["kafka"])
    leaf = _certificates(tls_dir / "broker.pem")[0]
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"kafka", "localhost"} <= set(names.get_values_for_type(x509.DNSName))


def test_an_expired_broker_certificate_is_renewed_without_logging_keys(
    tls_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ca_before = (tls_dir / "ca.pem").read_bytes()
    certificate, key = _signed_by_ca(tls_dir, "resultlog-broker", days=-1)
    expired = _pem(key) + certificate.public_bytes(serialization.Encoding.PEM) + ca_before
    _write_key(tls_dir / "broker.pem", expired)
    with caplog.at_level(logging.DEBUG):
        ensure_tls_files(tls_dir)
    leaf = _certificates(tls_dir / "broker.pem")[0]
    assert leaf.not_valid_after_utc > datetime.now(UTC) + timedelta(days=365)
    assert (tls_dir / "ca.pem").read_bytes() == ca_before  # clients keep trusting it
    assert _mode(tls_dir / "broker.pem") == 0o600
    assert "expires on" in caplog.text
    assert "PRIVATE KEY" not in caplog.text


def test_an_expired_or_broken_ca_is_a_one_line_error(tls_dir: Path) -> None:
    ca_key = serialization.load_pem_private_key((tls_dir / "ca.key").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    certificate, _ = _signed_by_ca(tls_dir, "resultlog local CA", days=-1, key=ca_key)
    (tls_dir / "ca.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    with pytest.raises(BrokerError, match=r"the CA .*ca\.pem expired on .*delete it"):
        ensure_tls_files(tls_dir)
    (tls_dir / "ca.pem").write_text("not a certificate\n")
    with pytest.raises(BrokerError, match="holds no PEM certificate"):
        ensure_tls_files(tls_dir)


def test_a_client_certificate_names_its_principal(client: tuple[Path, Path]) -> None:
    certificate_path, key_path = client
    assert certificate_path.name == "worker1.pem" and _mode(key_path) == 0o600
    certificate = _certificates(certificate_path)[0]
    assert certificate.subject.rfc4514_string() == "CN=worker1"
    settings = Settings(
        security_protocol="SSL",
        ssl_certificate_location=str(certificate_path),
        ssl_key_location=str(key_path),
    )
    assert settings.principal() == "User:worker1"


@pytest.mark.parametrize("principal", ["User:", "a b", "User:x/y", "n" * 65])
def test_a_bad_principal_name_gets_no_certificate(tls_dir: Path, principal: str) -> None:
    with pytest.raises(BrokerError, match="principal name"):
        LocalKafka(tls_dir).issue_certificate(principal)


def test_no_client_certificate_without_a_ca(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match=r"ca\.pem does not exist; start the cluster with --tls"):
        LocalKafka(tmp_path).issue_certificate("worker1")


# -- the settings ---------------------------------------------------------------------------------


def test_tls_settings_map_to_librdkafka(
    tls_dir: Path, client: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    certificate, key = client
    monkeypatch.setenv("RESULTLOG_SECURITY_PROTOCOL", "SSL")
    monkeypatch.setenv(CA, str(tls_dir / "ca.pem"))
    monkeypatch.setenv(CERTIFICATE, str(certificate))
    monkeypatch.setenv(KEY, str(key))
    config = Settings().client_config()
    assert config["security.protocol"] == "SSL"
    assert config["ssl.ca.location"] == str(tls_dir / "ca.pem")
    assert config["ssl.certificate.location"] == str(certificate)
    assert config["ssl.key.location"] == str(key)
    assert "ssl.key.password" not in config
    plain = Settings(
        ssl_ca_location=None, ssl_certificate_location=None, ssl_key_location=None
    ).client_config()
    assert not any(key.startswith("ssl.") for key in plain)


def test_an_encrypted_key_needs_its_password_which_stays_secret(
    tls_dir: Path, client: tuple[Path, Path]
) -> None:
    certificate, plain_key = client
    key = serialization.load_pem_private_key(plain_key.read_bytes(), None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    encrypted = _write_key(tls_dir / "encrypted.key", _pem(key, KEY_PASSWORD))
    pair = {"ssl_certificate_location": str(certificate), "ssl_key_location": str(encrypted)}
    assert _one_line_error(**pair) == f"{KEY} {encrypted} is encrypted; set its password"
    wrong = _one_line_error(**pair, ssl_key_password=SecretStr("wrong"))
    assert wrong.endswith("is not a PEM private key (or the password is wrong)")
    settings = Settings(**pair, ssl_key_password=SecretStr(KEY_PASSWORD))  # type: ignore[arg-type]
    assert settings.client_config()["ssl.key.password"] == KEY_PASSWORD
    for text in (repr(settings), str(settings), settings.model_dump_json()):
        assert KEY_PASSWORD not in text


def test_hostile_ca_settings_are_one_line_errors(
    tls_dir: Path, client: tuple[Path, Path], tmp_path: Path
) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    expired, _ = _signed_by_ca(tls_dir, "old", days=-1)
    old = tmp_path / "old.pem"
    old.write_bytes(expired.public_bytes(serialization.Encoding.PEM))
    cases = {
        str(tmp_path / "nope.pem"): "does not exist",
        str(tmp_path): "is a directory, not a PEM file",
        "": "is empty",
        str(garbage): "holds no PEM certificate",
        str(client[1]): "holds no PEM certificate",  # a key is not a CA
        "/dev/null": "holds no PEM certificate",
        str(old): "every certificate in it has expired",
    }
    for path, reason in cases.items():
        message = _one_line_error(ssl_ca_location=path)
        assert message.startswith(CA) and message.endswith(reason), message


def test_hostile_client_certificate_settings_are_one_line_errors(
    tls_dir: Path, client: tuple[Path, Path], tmp_path: Path
) -> None:
    certificate, key = client
    other_certificate, other_key = LocalKafka(tls_dir).issue_certificate("other")
    shared = _write_key(tmp_path / "shared.key", key.read_bytes(), 0o644)
    not_a_key = _write_key(tmp_path / "not-a.key", other_certificate.read_bytes())
    expired, expired_key = _signed_by_ca(tls_dir, "worker1", days=-1)
    old = tmp_path / "old.pem"
    old.write_bytes(expired.public_bytes(serialization.Encoding.PEM))
    old_key = _write_key(tmp_path / "old.key", _pem(expired_key))
    cases = [
        (certificate, tmp_path / "nope.key", f"{KEY} {tmp_path / 'nope.key'} does not exist"),
        (certificate, shared, f"{KEY} {shared} is readable by others (chmod 600 it)"),
        (certificate, other_key, f"{KEY} {other_key} does not match the certificate"),
        (certificate, not_a_key, f"{KEY} {not_a_key} is not a PEM private key"),
        (key, key, f"{CERTIFICATE} {key} holds no PEM certificate"),
        (old, old_key, f"{CERTIFICATE} {old} expired on"),
    ]
    for certificate_path, key_path, expected in cases:
        message = _one_line_error(
            ssl_certificate_location=str(certificate_path), ssl_key_location=str(key_path)
        )
        assert expected in message, message
    for half in ({"ssl_certificate_location": str(certificate)}, {"ssl_key_location": str(key)}):
        assert "go together (mutual TLS)" in _one_line_error(**half)


def test_the_principal_follows_the_login(client: tuple[Path, Path]) -> None:
    certificate, key = client
    sasl = Settings(security_protocol="SASL_SSL", sasl_username="alice")
    assert sasl.principal() == "User:alice"
    assert Settings(security_protocol="SSL").principal() == "User:ANONYMOUS"
    with_certificate = Settings(
        security_protocol="SASL_SSL",
        sasl_username="alice",
        ssl_certificate_location=str(certificate),
        ssl_key_location=str(key),
    )
    assert with_certificate.principal() == "User:alice"  # SASL names the principal


# -- the command line -----------------------------------------------------------------------------


def _cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RESULTLOG_")}
    return subprocess.run(
        [sys.executable, "-m", "resultlog.cli", *args],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _assert_one_line(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0 and len(lines) == 1, done.stderr
    assert lines[0].startswith("resultlog: error:"), lines
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_cli_names_the_bad_tls_setting(tmp_path: Path) -> None:
    run_key = ["--run-id", "r", "--benchmark", "arith", "--model", "m"]
    done = _cli("status", *run_key, **{CA: str(tmp_path / "missing.pem")})
    _assert_one_line(done, CA, "does not exist")


def test_cli_refuses_security_options_that_cannot_work(tmp_path: Path) -> None:
    directory = str(tmp_path / "kafka")
    up = ["kafka", "up", "--port", "0", "--dir", directory]
    _assert_one_line(_cli(*up, "--tls-client-auth", "required"), "needs --tls")
    _assert_one_line(_cli(*up, "--tls", "--authorizer"), "--authorizer needs authenticated")
    issue = ["kafka", "issue-cert", "--principal", "w", "--dir", directory]
    _assert_one_line(_cli(*issue), "does not exist; start the cluster with --tls")
    assert not (tmp_path / "kafka" / "cluster.json").exists()


def test_cli_certs_then_issue_cert_prints_usable_settings(tmp_path: Path) -> None:
    directory = str(tmp_path / "kafka")
    made = _cli("kafka", "certs", "--dir", directory, "--hostname", "kafka")
    assert made.returncode == 0, made.stderr
    issued = _cli("kafka", "issue-cert", "--principal", "User:w1", "--dir", directory)
    assert issued.returncode == 0, issued.stderr
    env = dict(line.split("=", 1) for line in issued.stdout.strip().splitlines())
    assert set(env) == {CERTIFICATE, KEY}
    settings = Settings(
        ssl_ca_location=str(tmp_path / "kafka" / "ca.pem"),
        ssl_certificate_location=env[CERTIFICATE],
        ssl_key_location=env[KEY],
    )
    assert settings.ssl_key_location == env[KEY]
    assert "PRIVATE KEY" not in made.stdout + made.stderr + issued.stdout + issued.stderr


def test_a_cluster_keeps_the_security_it_was_created_with(tmp_path: Path) -> None:
    kafka = LocalKafka(tmp_path / "kafka")
    kafka._prepare_state(0, 1, {})  # the state of a PLAINTEXT cluster, never started
    with pytest.raises(BrokerError, match="holds a PLAINTEXT cluster, not an SSL cluster"):
        kafka.up(port=0, tls=True)
    with pytest.raises(BrokerError, match="not a SASL_SSL cluster with mutual TLS and ACLs"):
        kafka.up(port=0, sasl_users={"a": "b"}, tls=True, client_auth=True, authorizer=True)


def test_the_admin_of_an_authorizer_is_named_when_unclear(tmp_path: Path) -> None:
    with pytest.raises(BrokerError, match="name the admin"):
        LocalKafka(tmp_path / "a").up(port=0, sasl_users={"a": "x", "b": "y"}, authorizer=True)
    with pytest.raises(BrokerError, match="not one of the SASL users"):
        LocalKafka(tmp_path / "b").up(port=0, sasl_users={"a": "x"}, authorizer=True, admin="z")
