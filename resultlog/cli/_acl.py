"""Handlers of `resultlog acl grant|revoke|list`: least-privilege roles as Kafka ACLs."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from resultlog.acl import Role, grant, list_acls, revoke, role_acls
from resultlog.cli._connect import connect

__all__ = ["register"]

_ROLES = "worker: write and read results, take work tasks; aggregator: read results, write "
_ROLES += "summaries and dead letters; viewer: read summaries"


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `acl grant|revoke|list` to the command line."""
    acl = commands.add_parser("acl", help="grant least-privilege roles (Kafka ACLs; as an admin)")
    actions = acl.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, handler, text in (
        ("grant", grant_role, "allow a principal what a role needs"),
        ("revoke", revoke_role, "remove what a role allowed a principal"),
    ):
        action = actions.add_parser(name, help=text, description=_ROLES)
        action.add_argument(
            "--role",
            required=True,
            choices=[role.value for role in Role],
            help="the role (what each allows: above)",
        )
        action.add_argument(
            "--principal", required=True, metavar="User:NAME", help="the Kafka principal"
        )
        action.add_argument(
            "--group", default=None, help="the role's consumer group, if not the settings' one"
        )
        action.set_defaults(handler=handler)
    listing = actions.add_parser("list", help="the ACLs on topics and groups")
    listing.add_argument(
        "--principal",
        default=None,
        metavar="User:NAME",
        help="only this principal's (default: all)",
    )
    listing.set_defaults(handler=list_all)


def grant_role(args: argparse.Namespace) -> int:
    """Create the role's ACLs for the principal (idempotent); print them."""
    with connect() as kafka:
        acls = role_acls(kafka.settings, Role(args.role), args.principal, args.group)
        grant(kafka, acls)
    for acl in acls:
        print(f"granted: {acl}")
    return 0


def revoke_role(args: argparse.Namespace) -> int:
    """Delete the role's ACLs of the principal."""
    with connect() as kafka:
        acls = role_acls(kafka.settings, Role(args.role), args.principal, args.group)
        removed = revoke(kafka, acls)
    print(f"revoked {removed} ACL(s) of role {args.role} from {args.principal}")
    return 0


def list_all(args: argparse.Namespace) -> int:
    """Print every ALLOW ACL on topics and groups, one per line."""
    with connect() as kafka:
        acls = list_acls(kafka, args.principal)
    for acl in acls:
        print(acl)
    if not acls:  # Kafka shows no ACL at all to a principal that may not describe them
        print("no ACLs (only a super user sees every ACL)", file=sys.stderr)
    return 0
