"""Certificates of a local cluster (with `cryptography`): a CA, the broker's, the clients'.

Under the cluster directory: `ca.pem` (what clients trust), `ca.key`, and `broker.pem` (the
broker's key, certificate and the CA in one file: Kafka's PEM keystore); client certificates
go to `clients/NAME.pem` and `clients/NAME.key`. Keys are EC P-256, unencrypted PKCS#8 (Kafka
on Java 17 cannot read the PBES2 encryption `cryptography` writes), in files of mode 0600.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from resultlog.broker._scram import INTERNAL_USER
from resultlog.broker._state import write_private
from resultlog.errors import BrokerError

__all__ = [
    "BROKER_KEYSTORE",
    "CA_CERTIFICATE",
    "TlsFiles",
    "certificate_name",
    "ensure_tls_files",
    "issue_client_certificate",
    "tls_paths",
]

CA_CERTIFICATE = "ca.pem"
CA_KEY = "ca.key"
BROKER_KEYSTORE = "broker.pem"
CLIENTS = "clients"
_CA_LIFETIME = timedelta(days=3650)
_LEAF_LIFETIME = timedelta(days=825)
# A certificate this close to its end is renewed at start: a broker serves an expired one.
_RENEW_BEFORE = timedelta(days=1)
_CLOCK_SKEW = timedelta(minutes=5)
_LOCAL_NAMES = ("localhost", "127.0.0.1")
# The principal a client certificate maps to (User:NAME, its CN): plain names only.
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_PEM = serialization.Encoding.PEM

log = logging.getLogger(__name__)

Certificate = x509.Certificate
PrivateKey = ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class TlsFiles:
    """The files a TLS cluster's brokers and its launcher read."""

    ca: Path
    keystore: Path


def tls_paths(directory: Path) -> TlsFiles:
    """Where the CA certificate and the broker keystore of a cluster directory are."""
    return TlsFiles(directory / CA_CERTIFICATE, directory / BROKER_KEYSTORE)


def ensure_tls_files(directory: Path, hostnames: Iterable[str] = ()) -> TlsFiles:
    """The CA and the broker keystore under `directory`, made when missing.

    The broker certificate is issued again (by the same CA) when it expired or is about to,
    when it names fewer `hostnames` than asked, or when another CA issued it.
    """
    files = tls_paths(directory)
    ca = _existing_ca(directory) or _new_ca(directory)
    wanted = {*_LOCAL_NAMES, *hostnames}
    current = _broker_certificate(files.keystore)
    why = _reissue_reason(current, ca, wanted)
    if why is not None:
        names = wanted | (_subject_names(current) if current is not None else set())
        if current is not None:
            log.info("issuing a new broker certificate: %s", why)
        _issue_broker(directory, ca, sorted(names), files.keystore)
    return files


def issue_client_certificate(
    directory: Path, name: str, out: Path | None = None
) -> tuple[Path, Path]:
    """Issue a certificate for the principal User:`name` (its CN); return (certificate, key)."""
    name = certificate_name(name)
    ca = _existing_ca(directory)
    if ca is None:
        raise BrokerError(
            f"{directory / CA_CERTIFICATE} does not exist; start the cluster with --tls first"
        )
    out = out or directory / CLIENTS
    out.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    usage = [ExtendedKeyUsageOID.CLIENT_AUTH]
    certificate = _issue(ca, _subject(name), key, usage, ())
    certificate_path, key_path = out / f"{name}.pem", out / f"{name}.key"
    write_private(key_path, _key_pem(key))
    certificate_path.write_bytes(certificate.public_bytes(_PEM))
    return certificate_path, key_path


def certificate_name(principal: str) -> str:
    """The CN of a client certificate for `principal` (NAME or User:NAME)."""
    name = principal.removeprefix("User:")
    if not _NAME.fullmatch(name):
        raise BrokerError(f"principal name {name!r} must be 1-64 of A-Z a-z 0-9 . _ -")
    return name


# -- the CA ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Ca:
    certificate: Certificate
    key_path: Path

    def key(self) -> PrivateKey:
        try:
            loaded = serialization.load_pem_private_key(self.key_path.read_bytes(), None)
        except FileNotFoundError:
            raise BrokerError(f"{self.key_path} is missing: no certificate can be issued") from None
        except (ValueError, TypeError):
            raise BrokerError(f"{self.key_path} is not an unencrypted PEM private key") from None
        if not isinstance(loaded, PrivateKey):
            raise BrokerError(f"{self.key_path} is not an EC private key")
        return loaded


def _existing_ca(directory: Path) -> _Ca | None:
    path = directory / CA_CERTIFICATE
    if not path.exists():
        return None
    try:
        certificate = x509.load_pem_x509_certificate(path.read_bytes())
    except ValueError:
        raise BrokerError(f"{path} holds no PEM certificate") from None
    ends = certificate.not_valid_after_utc
    if ends <= _now():
        raise BrokerError(
            f"the CA {path} expired on {ends:%Y-%m-%d}; delete it and {CA_KEY} to make a new "
            "one (every client must then trust the new ca.pem)"
        )
    return _Ca(certificate, directory / CA_KEY)


def _new_ca(directory: Path) -> _Ca:
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "resultlog local CA")])
    now = _now()
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + _CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_ca_usage(), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    write_private(directory / CA_KEY, _key_pem(key))
    (directory / CA_CERTIFICATE).write_bytes(certificate.public_bytes(_PEM))
    return _Ca(certificate, directory / CA_KEY)


def _ca_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )


# -- the broker's certificate ------------------------------------------------------------------
def _broker_certificate(keystore: Path) -> Certificate | None:
    if not keystore.exists():
        return None
    try:
        return x509.load_pem_x509_certificates(keystore.read_bytes())[0]
    except ValueError:
        return None  # not a keystore we can read: issue a new one


def _reissue_reason(current: Certificate | None, ca: _Ca, wanted: set[str]) -> str | None:
    """Why the broker needs a new certificate (None: it does not)."""
    if current is None:
        return "none yet"
    ends = current.not_valid_after_utc
    if ends - _RENEW_BEFORE <= _now():
        return f"the current one expires on {ends:%Y-%m-%d %H:%M} UTC"
    if current.issuer != ca.certificate.subject:
        return "the current one was issued by another CA"
    missing = wanted - _subject_names(current)
    if missing:
        return f"the current one does not name {', '.join(sorted(missing))}"
    return None


def _issue_broker(directory: Path, ca: _Ca, names: list[str], keystore: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    # The broker is a TLS client too (of its peers, with mutual TLS): both usages.
    usage = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    certificate = _issue(ca, _subject(INTERNAL_USER), key, usage, names)
    chain = certificate.public_bytes(_PEM) + ca.certificate.public_bytes(_PEM)
    write_private(keystore, _key_pem(key) + chain.decode("ascii"))


def _subject_names(certificate: Certificate) -> set[str]:
    try:
        names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    dns = names.get_values_for_type(x509.DNSName)
    ips = names.get_values_for_type(x509.IPAddress)
    return {*dns, *(str(ip) for ip in ips)}


def _alternative_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


# -- issuing -----------------------------------------------------------------------------------
def _subject(common_name: str) -> x509.Name:
    # CN alone: the broker's principal mapping rule turns it into User:<CN>.
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _issue(
    ca: _Ca,
    subject: x509.Name,
    key: PrivateKey,
    usage: list[x509.ObjectIdentifier],
    names: Iterable[str],
) -> Certificate:
    now = _now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(min(now + _LEAF_LIFETIME, ca.certificate.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
    )
    alternative = [_alternative_name(name) for name in names]
    if alternative:
        builder = builder.add_extension(x509.SubjectAlternativeName(alternative), critical=False)
    return builder.sign(ca.key(), hashes.SHA256())


def _key_pem(key: PrivateKey) -> str:
    return key.private_bytes(
        _PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode("ascii")


def _now() -> datetime:
    return datetime.now(UTC)
