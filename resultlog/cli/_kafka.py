"""Handlers of `resultlog kafka up|down` and `resultlog topics create`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from resultlog.broker import LocalKafka, sasl_users_from_env
from resultlog.cli._connect import connect
from resultlog.topics import ensure_topics

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[Any]) -> None:
    """Add `kafka up|down` and `topics create` to the command line."""
    kafka = commands.add_parser("kafka", help="run a local Apache Kafka (KRaft) broker")
    actions = kafka.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("up", help="start the local broker in the background")
    start.add_argument("--port", type=int, default=None, help="listener port (0: any free port)")
    start.add_argument("--dir", type=Path, default=None, help="data directory")
    start.add_argument("--brokers", type=int, default=1, choices=(1, 3), help="cluster size")
    start.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for it")
    start.add_argument("--sasl-user", metavar="NAME", help="require SCRAM-SHA-512 logins; add NAME")
    start.add_argument(
        "--sasl-password-env", metavar="VAR", help="environment variable with NAME's password"
    )
    start.set_defaults(handler=up)
    stop = actions.add_parser("down", help="stop the local broker")
    stop.add_argument("--dir", type=Path, default=None, help="data directory")
    stop.set_defaults(handler=down)

    topics = commands.add_parser("topics", help="manage the resultlog topics")
    topic_actions = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = topic_actions.add_parser("create", help="create the topics idempotently")
    create.set_defaults(handler=topics_create)


def up(args: argparse.Namespace) -> int:
    """Start the local broker (harmless when it already runs); print its bootstrap address."""
    users = sasl_users_from_env(args.sasl_user, args.sasl_password_env)
    kafka = LocalKafka(args.dir)
    print(kafka.up(port=args.port, brokers=args.brokers, timeout=args.timeout, sasl_users=users))
    return 0


def down(args: argparse.Namespace) -> int:
    """Stop the local broker."""
    kafka = LocalKafka(args.dir)
    print("stopped" if kafka.down() else f"no local Kafka running in {kafka.directory}")
    return 0


def topics_create(args: argparse.Namespace) -> int:
    """Create the three topics, or check that the existing ones match the settings."""
    with connect() as kafka:
        outcomes = ensure_topics(kafka)
    for outcome in outcomes:
        print(f"{outcome.name}: {'created' if outcome.created else 'exists, matches settings'}")
    return 0
