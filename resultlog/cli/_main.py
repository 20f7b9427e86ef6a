"""Parse arguments, dispatch to a sub-command, turn every error into one line."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from resultlog.cli import (
    _acl,
    _aggregator,
    _export,
    _inspect,
    _kafka,
    _lm_eval,
    _purge,
    _replay,
    _rescore,
    _run,
    _status,
    _submit,
    _up,
    _worker,
)
from resultlog.cli._args import HelpFormatter
from resultlog.schemas.errors import ResultLogError

__all__ = ["build_parser", "main"]

_BROKEN_PIPE = 128 + signal.SIGPIPE  # what a shell reports for a process ended by SIGPIPE

Handler = Callable[[argparse.Namespace], int]
_PROG = "resultlog"
if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[Any]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, like every other error of the CLI, and
    whose help shows each option's default (sub-command parsers are of this class too)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        where = "" if self.prog == _PROG else f"{self.prog}: "
        self.exit(2, f"resultlog: error: {where}{message}\n")


class _Version(argparse.Action):
    """`--version`: what it prints is looked up only when asked (package metadata is slow)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from importlib.metadata import version

        from resultlog._hotpath import compiled
        from resultlog.broker import KAFKA_VERSION

        fold = "mypyc" if compiled() else "pure Python"
        local = f"local broker: Apache Kafka {KAFKA_VERSION}"
        print(f"{_PROG} {version('resultlog')} ({local}; fold: {fold})")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command."""
    parser = _Parser(
        prog=_PROG,
        description=(
            "Event-sourced results log on Kafka for LLM evals. Start with `resultlog up` (the "
            "local stack), then `resultlog run arith --model M --run-id R`."
        ),
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log more (INFO)")
    parser.add_argument(
        "--version", action=_Version, nargs=0, help="show program's version number and exit"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for register in _command_registrars():
        register(commands)
    return parser


def _command_registrars() -> list[Callable[[Commands], None]]:
    """Every sub-command, in the order `--help` lists them."""
    return [
        _up.register,
        _kafka.register,
        _run.register,
        _status.register,
        _replay.register,
        _rescore.register,
        _export.register,
        _purge.register,
        _aggregator.register,
        _inspect.register,
        _lm_eval.register,
        _acl.register,
        _submit.register,
        _worker.register,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    args = None
    try:
        args = build_parser().parse_args(argv)
        check: Callable[[argparse.Namespace], None] | None = getattr(args, "check", None)
        if check is not None:  # arguments refused before anything loads or is called
            check(args)
        _configure_logging(args.verbose)
        # Only now: a command's modules load when it runs (--help and --version need none).
        from resultlog.settings import warn_unknown_variables

        warn_unknown_variables(os.environ)
        handler: Handler = args.handler
        return handler(args)
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except ResultLogError as exc:
        return _fail(str(exc))
    except OSError as exc:  # a file, directory or port the OS refused
        return _fail(_os_error(exc))
    except KeyboardInterrupt:
        # A command that can be continued says how (set_defaults(on_interrupt=...)).
        hint = getattr(args, "on_interrupt", None)
        return _fail(f"interrupted; {hint}" if hint else "interrupted", code=130)
    except Exception as exc:
        invalid = _invalid(exc)
        if invalid is None:
            raise
        return _fail(invalid)


def _invalid(exc: Exception) -> str | None:
    """One line for settings or input pydantic refused (None: not a ValidationError)."""
    if "pydantic" not in sys.modules:  # not loaded, so nothing it raised
        return None
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return None
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "input"
    return f"invalid {where}: {first['msg']}"


def _os_error(exc: OSError) -> str:
    """One line for an OSError: what failed and on which file, if any."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{reason}: {exc.filename}" if exc.filename is not None else reason


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away (`| head`): stop quietly, as Unix tools do."""
    # Later writes (the interpreter's final flush) must not fail again.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return _BROKEN_PIPE


def _configure_logging(verbose: bool) -> None:
    from resultlog.kafka import LIBRDKAFKA_LOGGER

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
