"""How the clients of a local cluster connect (SASL, TLS, mutual TLS, ACLs), fixed at creation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from resultlog.broker._state import ClusterState
from resultlog.errors import BrokerError

__all__ = ["CERTIFICATE_ADMIN", "Security"]

# The super user of a cluster whose clients authenticate by certificate alone.
CERTIFICATE_ADMIN = "admin"


@dataclass(frozen=True)
class Security:
    """The security options of `kafka up`."""

    sasl: bool = False
    tls: bool = False
    client_auth: bool = False
    authorizer: bool = False

    @classmethod
    def of(cls, state: ClusterState) -> Security:
        """The options a cluster was created with."""
        return cls(state.sasl, state.tls, state.client_auth, state.admin is not None)

    def check(self) -> None:
        """Refuse combinations that cannot work."""
        if self.client_auth and not self.tls:
            raise BrokerError("--tls-client-auth required needs --tls")
        if self.authorizer and not (self.sasl or self.client_auth):
            # Everyone would be User:ANONYMOUS: nobody could be granted anything.
            raise BrokerError(
                "--authorizer needs authenticated clients: --sasl-user (the admin) "
                "or --tls --tls-client-auth required"
            )

    def admin(self, users: Mapping[str, str], chosen: str | None) -> str | None:
        """The super user of a new cluster: `chosen`, else the one SASL user, else `admin`."""
        if not self.authorizer:
            return None
        if chosen is not None:
            if self.sasl and chosen not in users:
                raise BrokerError(f"the admin {chosen!r} is not one of the SASL users")
            return chosen
        if not self.sasl:
            return CERTIFICATE_ADMIN
        if len(users) != 1:
            raise BrokerError("with several SASL users, name the admin (super user)")
        return next(iter(users))

    def describe(self) -> str:
        """For example `a SASL_SSL cluster with mutual TLS and ACLs`."""
        protocol = ("SASL_" if self.sasl else "") + ("SSL" if self.tls else "PLAINTEXT")
        extras = [
            name for name, on in (("mutual TLS", self.client_auth), ("ACLs", self.authorizer)) if on
        ]
        article = "an" if protocol == "SSL" else "a"
        return f"{article} {protocol} cluster" + (f" with {' and '.join(extras)}" if extras else "")
