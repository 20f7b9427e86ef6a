"""One bounded pool for the HTTP routes that read the log (samples, compare, the page's parts).

At most `readers` such requests read at once, each on a worker thread of their own limiter,
so waiting ones hold no thread of the server's pool and `/healthz` never queues behind them.
A request whose client has gone is told to stop (its `threading.Event` is set): the reader
checks it as it goes and gives up.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response

__all__ = ["READERS", "ReadPool"]

READERS = 3  # log readers at once, whatever the number of clients
_WATCH_S = 0.1  # how often a waiting or reading request looks for its client


class ReadPool:
    """Run route bodies that read the log, a few at a time, stopped when the client leaves."""

    def __init__(self, readers: int = READERS) -> None:
        self._limiter = anyio.CapacityLimiter(readers)

    def route(
        self, body: Callable[[Request, threading.Event], Response]
    ) -> Callable[[Request], Awaitable[Response]]:
        """An async route running `body(request, stop)` in the pool."""

        def call(request: Request, stop: threading.Event) -> Response | Exception:
            try:
                return body(request, stop)
            except Exception as exc:  # raised again outside the task group, unwrapped
                return exc

        async def handler(request: Request) -> Response:
            stop = threading.Event()
            outcome: list[Response | Exception] = []
            async with anyio.create_task_group() as group:
                group.start_soon(_watch, request, stop)
                try:
                    outcome.append(
                        await anyio.to_thread.run_sync(call, request, stop, limiter=self._limiter)
                    )
                finally:
                    stop.set()  # ends the watcher
            if isinstance(outcome[0], Exception):
                raise outcome[0]
            return outcome[0]

        return handler


async def _watch(request: Request, stop: threading.Event) -> None:
    """Set `stop` once the client has disconnected (or the request is done)."""
    while not stop.is_set():
        if await request.is_disconnected():
            stop.set()
            return
        await anyio.sleep(_WATCH_S)
