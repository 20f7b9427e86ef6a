"""The `resultlog` command line (docs/reference/cli.md): `main` is the console script."""

from __future__ import annotations

from resultlog.cli._main import build_parser, main

__all__ = ["build_parser", "main"]
