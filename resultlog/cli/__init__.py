"""The `resultlog` command line (docs/reference/cli.md): `main` is the console script."""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from resultlog.cli._interrupt import raise_interrupts_whole

if TYPE_CHECKING:
    from resultlog.cli._main import build_parser

__all__ = ["build_parser", "main"]

_INTERRUPTED = 130  # what a shell reports for a process ended by SIGINT: 128 + 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code.

    The command modules are imported here, inside the guard: loading them takes a good part
    of a second, and Ctrl-C meanwhile is one line, not a traceback.
    """
    raise_interrupts_whole()
    try:
        from resultlog.cli._main import main as run
    except KeyboardInterrupt:
        print("resultlog: error: interrupted", file=sys.stderr)
        return _INTERRUPTED
    try:
        return run(argv)
    finally:
        # The interpreter's last garbage collection would walk every object the imports made
        # (pydantic's schemas, the Kafka client's modules): about 0.1 s of CPU, a fifth of a
        # short command. Frozen objects are skipped; they are freed with the process.
        gc.freeze()


def __getattr__(name: str) -> Any:
    if name == "build_parser":
        from resultlog.cli._main import build_parser

        return build_parser
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
