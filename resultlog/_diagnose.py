"""Why a Kafka connection fails, in one line: TLS, mutual TLS and SASL listeners probed.

librdkafka reports an unknown CA, an expired broker certificate and a host missing from the
certificate alike ("certificate verify failed"), a plaintext client on a TLS listener only as
"all brokers down", and retries each forever. A plain Python TLS handshake to the first
bootstrap server tells them apart within a second.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

from confluent_kafka import KafkaError

from resultlog.settings import Settings

__all__ = ["diagnose_tls"]

_PROBE_S = 2.0
_TRANSPORT = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN})
# What OpenSSL says when the broker's alert refuses the client's certificate (or its lack).
_CLIENT_CERTIFICATE_ALERTS = (
    "alert bad certificate",
    "alert certificate required",
    "alert unknown ca",
    "alert certificate unknown",
)


def diagnose_tls(settings: Settings, errors: list[KafkaError]) -> str | None:
    """The one-line reason a TLS-related connection fails, or None if it is not one."""
    host, port = _first_server(settings.bootstrap_servers)
    where, protocol = f"{host}:{port}", settings.security_protocol
    codes = {error.code() for error in errors}
    if KafkaError._SSL in codes:
        kind, detail = _tls_handshake(host, port, settings.ssl_ca_location)
        if kind == "verify":
            return (
                f"TLS to Kafka at {where} failed: the broker's certificate was rejected "
                f"({detail}); check RESULTLOG_SSL_CA_LOCATION"
            )
        return f"TLS to Kafka at {where} failed: {_said(errors, KafkaError._SSL)}"
    if not codes or not codes <= _TRANSPORT:
        return None
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT") and _speaks_tls(host, port):
        return (
            f"Kafka at {where} expects TLS but the client uses {protocol}; set "
            "RESULTLOG_SECURITY_PROTOCOL=SSL (or SASL_SSL) and RESULTLOG_SSL_CA_LOCATION"
        )
    said = " ".join(error.str() for error in errors)
    if any(alert in said for alert in _CLIENT_CERTIFICATE_ALERTS):
        certificate = settings.ssl_certificate_location
        if certificate is not None:  # one was sent: the broker does not trust who signed it
            return (
                f"Kafka at {where} refused the client certificate {certificate} (mutual TLS): "
                f"it was issued by {_issuer(certificate)}, a CA the broker does not trust; use "
                "one its CA issued (`resultlog kafka issue-cert`) in "
                "RESULTLOG_SSL_CERTIFICATE_LOCATION"
            )
        return (
            f"Kafka at {where} requires a client certificate (mutual TLS); set "
            "RESULTLOG_SSL_CERTIFICATE_LOCATION and RESULTLOG_SSL_KEY_LOCATION"
        )
    if protocol in ("SSL", "SASL_SSL") and not _speaks_tls(host, port):
        return (
            f"Kafka at {where} does not speak TLS but the client uses {protocol}; "
            "check RESULTLOG_SECURITY_PROTOCOL and RESULTLOG_BOOTSTRAP_SERVERS"
        )
    return None


def _issuer(path: str) -> str:
    """The issuer of the first certificate in a PEM file, as people read it."""
    from cryptography import x509  # only for a failed TLS handshake

    try:
        certificate = x509.load_pem_x509_certificates(Path(path).read_bytes())[0]
    except (OSError, ValueError, IndexError):
        return "an unknown issuer"
    return certificate.issuer.rfc4514_string()


def _first_server(servers: str) -> tuple[str, int]:
    host, _, port = servers.split(",", maxsplit=1)[0].strip().rpartition(":")
    return host.strip("[]"), int(port) if port.isdecimal() else 9092


def _tls_handshake(host: str, port: int, cafile: str | None) -> tuple[str, str]:
    """What a verifying TLS handshake says: ("ok"|"verify"|"ssl"|"os"|"ca", detail)."""
    try:
        context = ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        return "ca", str(exc)
    try:
        with (
            socket.create_connection((host, port), _PROBE_S) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            return "ok", ""
    except ssl.SSLCertVerificationError as exc:
        return "verify", str(exc.verify_message)  # e.g. "certificate has expired"
    except ssl.SSLError as exc:
        return "ssl", str(exc.reason or exc)
    except OSError as exc:
        return "os", str(exc.strerror or exc)


def _speaks_tls(host: str, port: int) -> bool:
    """Whether the listener completes a TLS handshake (certificate not checked)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), _PROBE_S) as raw, context.wrap_socket(raw):
            return True
    except (ssl.SSLError, OSError):
        return False


def _said(errors: list[KafkaError], code: int) -> str:
    """librdkafka's text for the first error of a code, without its broker prefix and timing."""
    for error in errors:
        if error.code() == code:
            text = str(error.str())
            text = text.split(": ", 1)[1] if "/bootstrap: " in text else text
            return text.split(" (after ", 1)[0]
    return ""
