"""SCRAM-SHA-512 for the local cluster: users, salted credentials, broker SASL properties."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import secrets
from collections.abc import Mapping

from resultlog.errors import BrokerError

__all__ = [
    "INTERNAL_USER",
    "SCRAM_ITERATIONS",
    "SCRAM_MECHANISM",
    "checked_users",
    "sasl_properties",
    "sasl_users_from_env",
    "scram_arguments",
]

SCRAM_MECHANISM = "SCRAM-SHA-512"
SCRAM_ITERATIONS = 4096  # Kafka's minimum for SCRAM-SHA-512
INTERNAL_USER = "resultlog-broker"
# Names go verbatim into --add-scram and SCRAM's own syntax: keep them plain.
_USER_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


def sasl_properties(internal_secret: str, listener: str) -> dict[str, object]:
    """SCRAM on the client and inter-broker listener named `listener`."""
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{INTERNAL_USER}" password="{internal_secret}";'
    )
    return {
        "sasl.enabled.mechanisms": SCRAM_MECHANISM,
        "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
        f"listener.name.{listener.lower()}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": jaas,
    }


def checked_users(users: Mapping[str, str] | None) -> dict[str, str]:
    """The SASL users to create, refusing names SCRAM syntax cannot carry and empty passwords."""
    checked = dict(users or {})
    for name, password in checked.items():
        if not _USER_NAME.fullmatch(name) or name == INTERNAL_USER:
            raise BrokerError(
                f"SASL user name {name!r} must be 1-64 of A-Z a-z 0-9 . _ - and not {INTERNAL_USER}"
            )
        if not password:
            raise BrokerError(f"the SASL password of {name} is empty")
    return checked


def scram_arguments(users: Mapping[str, str], internal_secret: str | None) -> list[str]:
    """`--add-scram` values: salted, so no password is ever on a command line.

    None for the internal secret: the cluster has no SCRAM logins.
    """
    if internal_secret is None:
        return []
    everyone = {**users, INTERNAL_USER: internal_secret}
    return [_salted_credential(name, password) for name, password in everyone.items()]


def _salted_credential(name: str, password: str) -> str:
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha512", password.encode("utf-8"), salt, SCRAM_ITERATIONS)
    encode = base64.b64encode
    return (
        f"{SCRAM_MECHANISM}=[name={name},iterations={SCRAM_ITERATIONS},"
        f'salt="{encode(salt).decode()}",saltedpassword="{encode(salted).decode()}"]'
    )


def sasl_users_from_env(user: str | None, password_env: str | None) -> dict[str, str] | None:
    """`kafka up --sasl-user NAME --sasl-password-env VAR`: the one user, its password from VAR.

    The password comes from the environment, never the command line, where `ps` would show it.
    """
    if user is None and password_env is None:
        return None
    if user is None or password_env is None:
        raise BrokerError("--sasl-user and --sasl-password-env must be given together")
    password = os.environ.get(password_env)
    if not password:
        raise BrokerError(f"environment variable {password_env} (the SASL password) is not set")
    return {user: password}
