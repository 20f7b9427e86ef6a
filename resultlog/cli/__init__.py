"""The `resultlog` command line (DESIGN.md, "Command line"): `main` is the console script."""

from __future__ import annotations

from resultlog.cli._main import build_parser, main

__all__ = ["build_parser", "main"]
