"""Argument types shared by every command line of the package (the CLI, the model server)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

__all__ = ["bounded"]

T = TypeVar("T", int, float)


def bounded(name: str, kind: Callable[[str], T], low: T, high: T) -> Callable[[str], T]:
    """An argparse type: an int or float (`kind`) in [low, high] (which also refuses nan)."""
    what = "an integer" if kind is int else "a number"

    def parse(text: str) -> T:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be {what}, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{name} must be between {low} and {high}, got {text}")
        return value

    return parse
