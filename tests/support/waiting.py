"""Waiting for something that happens eventually, failing with what was last seen."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")
DEADLINE_S = 60.0
_POLL_S = 0.05


def wait_for(
    probe: Callable[[], T | None],
    what: str,
    timeout_s: float = DEADLINE_S,
    every_s: float = _POLL_S,
) -> T:
    """Poll `probe` every `every_s` until it returns something truthy; fail naming `what` at
    the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}: last saw {found!r}")
        time.sleep(every_s)
