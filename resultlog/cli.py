"""The `resultlog` command line: parse arguments, dispatch, turn errors into one line."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import ValidationError

from resultlog import _cmd_aggregator, _cmd_kafka, _cmd_purge, _cmd_replay, _cmd_run
from resultlog.kafka import LIBRDKAFKA_LOGGER
from resultlog.schemas.errors import ResultLogError

__all__ = ["build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]
if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[Any]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other error of the CLI."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"resultlog: error: {self.prog}: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    parser = _Parser(
        prog="resultlog", description="Event-sourced results log on Kafka for LLM evals."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log more")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_kafka(commands)
    _add_topics(commands)
    for register in _command_registrars():
        register(commands)
    return parser


def _add_kafka(commands: Commands) -> None:
    kafka = commands.add_parser("kafka", help="run a local Apache Kafka (KRaft) broker")
    actions = kafka.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser("up", help="start the local broker in the background")
    up.add_argument("--port", type=int, default=None, help="listener port (0: any free port)")
    up.add_argument("--dir", type=Path, default=None, help="data directory")
    up.add_argument("--brokers", type=int, default=1, choices=(1, 3), help="cluster size")
    up.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for it")
    up.add_argument("--sasl-user", metavar="NAME", help="require SCRAM-SHA-512 logins; add NAME")
    up.add_argument(
        "--sasl-password-env", metavar="VAR", help="environment variable with NAME's password"
    )
    up.set_defaults(handler=_cmd_kafka.up)
    down = actions.add_parser("down", help="stop the local broker")
    down.add_argument("--dir", type=Path, default=None, help="data directory")
    down.set_defaults(handler=_cmd_kafka.down)


def _add_topics(commands: Commands) -> None:
    topics = commands.add_parser("topics", help="manage the resultlog topics")
    actions = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser("create", help="create the topics idempotently")
    create.set_defaults(handler=_cmd_kafka.topics_create)


def _command_registrars() -> list[Callable[[Commands], None]]:
    """Sub-commands of the worker and consumer sides."""
    return [_cmd_run.register, _cmd_replay.register, _cmd_purge.register, _cmd_aggregator.register]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    args = build_parser().parse_args(argv)
    _configure_logging(args.verbose)
    handler: Handler = args.handler
    try:
        return handler(args)
    except ResultLogError as exc:
        return _fail(str(exc))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "input"
        return _fail(f"invalid {where}: {first['msg']}")
    except KeyboardInterrupt:
        return _fail("interrupted", code=130)


def _configure_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="resultlog: %(levelname)s: %(message)s",
        stream=sys.stderr,
    )
    # Kafka client chatter (reconnects, retries) surfaces as errors anyway when it matters.
    LIBRDKAFKA_LOGGER.setLevel(logging.INFO if verbose else logging.CRITICAL)


def _fail(message: str, code: int = 1) -> int:
    print(f"resultlog: error: {message}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
