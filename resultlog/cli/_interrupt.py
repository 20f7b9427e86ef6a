"""Ctrl-C as one KeyboardInterrupt that survives the Kafka client's callbacks."""

from __future__ import annotations

import signal
from collections.abc import Coroutine
from typing import Any, TypeVar

_T = TypeVar("_T")


def raise_interrupts_whole() -> None:
    """Make Ctrl-C raise a KeyboardInterrupt instance rather than Python's bare default.

    Python's default handler raises the bare class. When that happens inside a
    confluent-kafka callback (librdkafka's log lines reach `logging` through one), the
    client, on Python before 3.12, keeps only the exception's value, which is not there yet,
    and the Kafka call fails with SystemError ("returned NULL without setting an
    exception"). An instance survives it.
    """
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        try:
            signal.signal(signal.SIGINT, _interrupt)
        except ValueError:  # not the main thread (a test calling main from one): not ours
            return


def run_async(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """`asyncio.run`, with its own Ctrl-C handling: it cancels the main task.

    asyncio.run installs that handler only over Python's default one, so the default is put
    back for the run (asyncio's own handler raises instances, which survive callbacks).
    """
    import asyncio

    try:
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:  # not the main thread: asyncio installs no handler there either
        return asyncio.run(coroutine)
    try:
        return asyncio.run(coroutine)
    finally:
        signal.signal(signal.SIGINT, previous)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt
