"""The PEM files TLS settings name, checked before librdkafka reads them: one line per problem.

librdkafka reports a missing or malformed file as an OpenSSL error code at client creation,
and an expired or mismatched one only as a failed handshake: these checks say which setting
is wrong and why.
"""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from resultlog.schemas.errors import ResultLogError

if TYPE_CHECKING:  # imported where a file is checked: most commands name no TLS file
    from cryptography import x509

__all__ = ["PemError", "check_ca", "check_client_pair", "check_private", "common_name"]

_GROUP_OR_OTHER = stat.S_IRWXG | stat.S_IRWXO


class PemError(ResultLogError, ValueError):
    """A TLS file named by a setting is unusable; the message names the setting."""


def check_ca(setting: str, path: str) -> None:
    """The CA file holds at least one PEM certificate that has not expired."""
    certificates = _certificates(setting, path)
    if all(c.not_valid_after_utc <= _now() for c in certificates):
        raise PemError(f"{setting} {path}: every certificate in it has expired")


def check_client_pair(
    certificate_setting: str,
    certificate_path: str,
    key_setting: str,
    key_path: str,
    password: str | None,
) -> None:
    """The client certificate is valid now, and the key is private, readable and matches it."""
    from cryptography.hazmat.primitives import serialization

    certificate = _certificates(certificate_setting, certificate_path)[0]
    ends = certificate.not_valid_after_utc
    if ends <= _now():
        raise PemError(f"{certificate_setting} {certificate_path} expired on {ends:%Y-%m-%d}")
    data = _read(key_setting, key_path)
    check_private(key_setting, key_path)
    try:
        key = serialization.load_pem_private_key(data, password.encode() if password else None)
    except TypeError:
        raise PemError(f"{key_setting} {key_path} is encrypted; set its password") from None
    except ValueError:
        raise PemError(
            f"{key_setting} {key_path} is not a PEM private key (or the password is wrong)"
        ) from None
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if key.public_key().public_bytes(*spki) != certificate.public_key().public_bytes(*spki):
        raise PemError(
            f"{key_setting} {key_path} does not match the certificate {certificate_path}"
        )


def check_private(setting: str, path: str) -> None:
    """A private key file no group or other user may read or write."""
    if Path(path).stat().st_mode & _GROUP_OR_OTHER:
        raise PemError(f"{setting} {path} is readable by others (chmod 600 it)")


def common_name(path: str) -> str | None:
    """The CN of the first certificate in a PEM file (None without one)."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    certificate = x509.load_pem_x509_certificates(Path(path).read_bytes())[0]
    names = certificate.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else None


def _certificates(setting: str, path: str) -> list[x509.Certificate]:
    from cryptography import x509

    data = _read(setting, path)
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise PemError(f"{setting} {path} holds no PEM certificate") from None


def _read(setting: str, path: str) -> bytes:
    if not path:
        raise PemError(f"{setting} is empty")
    file = Path(path)
    try:
        if file.is_dir():
            raise PemError(f"{setting} {path} is a directory, not a PEM file")
        return file.read_bytes()
    except FileNotFoundError:
        raise PemError(f"{setting} {path} does not exist") from None
    except PermissionError:
        raise PemError(f"{setting} {path} is not readable") from None
    except OSError as exc:
        raise PemError(f"{setting} {path} cannot be read: {exc.strerror}") from None


def _now() -> datetime:
    return datetime.now(UTC)
