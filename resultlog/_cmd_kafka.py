"""Handlers of `resultlog kafka up|down` and `resultlog topics create`."""

from __future__ import annotations

import argparse

from resultlog._connect import connect
from resultlog.broker import LocalKafka, sasl_users_from_env
from resultlog.topics import ensure_topics

__all__ = ["down", "topics_create", "up"]


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
