"""Argument types of the command line: each rejects bad input with a message naming it."""

from __future__ import annotations

import argparse
import unicodedata
from collections.abc import Callable
from pathlib import PurePath

from resultlog._argtypes import bounded
from resultlog.errors import CliError
from resultlog.schemas import InvalidRunKeyError, RunKey, check_run_key_part

__all__ = [
    "HelpFormatter",
    "add_concurrency",
    "add_epochs",
    "add_group",
    "add_run_key",
    "add_run_key_part",
    "benchmark_name",
    "int_between",
    "parse_range",
    "port_number",
    "positive_int",
    "run_key_of",
    "run_key_part",
]

_RUN_KEY_OPTIONS = (("run_id", "run id"), ("benchmark", "benchmark"), ("model", "model"))

_RUN_KEY_HELP = {
    "run_id": "the run's id (the --run-id it ran with)",
    "benchmark": "the benchmark's id (arith, or the JSONL file's name without .jsonl)",
    "model": "the model, as given to --model",
}

_MAX_PART = 256
_MAX_CONCURRENCY = 1024
_MAX_EPOCHS = 1000


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows an option's default, unless it has none or its text already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        # Identity: a default of 0 is worth showing, and 0 == False.
        if any(action.default is v for v in (None, False, argparse.SUPPRESS)) or "default" in text:
            return text
        return super()._get_help_string(action)


def positive_int(name: str, maximum: int) -> Callable[[str], int]:
    """An argparse type: an integer in [1, maximum]."""
    return int_between(name, 1, maximum)


def int_between(name: str, low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high]."""
    return bounded(name, int, low, high)


port_number = int_between("port", 0, 65535)
"""An argparse type: a TCP port, 0 (any free port) to 65535."""


def run_key_part(name: str) -> Callable[[str], str]:
    """An argparse type: a run key part (as `RunKey` accepts it, no surrounding space, at most
    256 characters)."""

    def parse(text: str) -> str:
        if not text or text != text.strip():
            raise argparse.ArgumentTypeError(f"{name} must be non-empty without outer spaces")
        if len(text) > _MAX_PART:
            raise argparse.ArgumentTypeError(f"{name} is longer than {_MAX_PART} characters")
        try:
            check_run_key_part(text, name)
        except InvalidRunKeyError as exc:
            reason = str(exc).removeprefix(f"RunKey.{name} ")
            raise argparse.ArgumentTypeError(f"{name} {reason}") from None
        # Stricter than the schema: no format or private-use characters either.
        if any(unicodedata.category(char).startswith("C") for char in text):
            raise argparse.ArgumentTypeError(f"{name} contains a control character")
        return text

    return parse


def add_run_key(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """Add --run-id, --benchmark and --model: the run key a command is about."""
    for dest, _ in _RUN_KEY_OPTIONS:
        add_run_key_part(parser, dest, help=_RUN_KEY_HELP[dest], required=required)


def add_run_key_part(
    parser: argparse.ArgumentParser, dest: str, *, help: str, required: bool = True
) -> None:
    """Add one of --run-id, --benchmark and --model (`dest` names it), as a command means it."""
    name = dict(_RUN_KEY_OPTIONS)[dest]
    parser.add_argument(
        "--" + dest.replace("_", "-"), required=required, type=run_key_part(name), help=help
    )


def add_concurrency(parser: argparse.ArgumentParser, *, help: str) -> None:
    """Add --concurrency: how much a command does at once (8 unless said)."""
    parser.add_argument(
        "--concurrency", type=positive_int("concurrency", _MAX_CONCURRENCY), default=8, help=help
    )


def add_group(parser: argparse.ArgumentParser, *, help: str) -> None:
    """Add --group: the consumer group a command joins or looks at (default: the settings')."""
    parser.add_argument("--group", type=run_key_part("group"), default=None, help=help)


def add_epochs(parser: argparse.ArgumentParser, *, default: int | None, help: str) -> None:
    """Add --epochs: how many times each sample of a run is asked."""
    parser.add_argument(
        "--epochs", type=positive_int("epochs", _MAX_EPOCHS), default=default, help=help
    )


def run_key_of(args: argparse.Namespace, alternative: str | None = None) -> RunKey:
    """The run key named by --run-id, --benchmark and --model; one line naming what is missing."""
    missing = [
        "--" + dest.replace("_", "-") for dest, _ in _RUN_KEY_OPTIONS if not getattr(args, dest)
    ]
    if missing:
        instead = f" (or {alternative})" if alternative else ""
        raise CliError(f"{args.command} needs {', '.join(missing)}{instead}")
    return RunKey(args.run_id, benchmark_name(args.benchmark), args.model)


def benchmark_name(given: str) -> str:
    """The benchmark id `run` records for --benchmark: a JSONL file is named after its stem."""
    return PurePath(given).stem if given.endswith(".jsonl") else given


def parse_range(text: str) -> tuple[int, int]:
    """An argparse type: `A:B`, a half-open range of absolute sample indexes, 0 <= A < B."""
    start, sep, end = text.partition(":")
    try:
        if not sep:
            raise ValueError
        bounds = int(start), int(end)
    except ValueError:
        raise argparse.ArgumentTypeError(f"range must look like A:B, got {text!r}") from None
    if not 0 <= bounds[0] < bounds[1]:
        raise argparse.ArgumentTypeError(f"range must satisfy 0 <= A < B, got {text!r}")
    return bounds
