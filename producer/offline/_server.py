"""The embedded offline model server: serves on its own thread and event loop."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import Counter
from pathlib import Path
from typing import Self

from resultlog.producer.offline._app import App, Behavior, Config, LoggedRequest, State
from resultlog.producer.offline._http11 import Http11Server, listen
from resultlog.producer.offline._model import (
    DEFAULT_ERROR_RATE,
    DEFAULT_SEED,
    DEFAULT_WRONG_RATE,
    Outcome,
    expected_outcome,
)

__all__ = ["ModelServer"]


class ModelServer:
    """The offline model server, running on its own thread and event loop.

    `with ModelServer() as srv:` serves at `srv.base_url` (http://127.0.0.1:PORT/v1)
    until the block ends.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_s: float = 0.005,
        seed: int = DEFAULT_SEED,
        error_rate: float = DEFAULT_ERROR_RATE,
        wrong_rate: float = DEFAULT_WRONG_RATE,
        request_log: str | Path | None = None,
    ) -> None:
        self.host = host
        self._port = port
        self._config = Config(latency_s, seed, error_rate, wrong_rate)
        self._log_path = Path(request_log) if request_log is not None else None
        self._state = State(None)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    @property
    def port(self) -> int:
        """The bound port (chosen by the OS when constructed with port 0)."""
        return self._port

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ending in /v1."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self._port}/v1"

    @property
    def requests(self) -> list[LoggedRequest]:
        """A snapshot of every chat-completions request received so far."""
        return self._state.requests()

    def request_counts(self) -> Counter[tuple[str | None, int | None]]:
        """How many requests each (sample_id, epoch) sent."""
        return Counter((r.sample_id, r.epoch) for r in self._state.requests())

    def request_count(self, sample_id: str, epoch: int) -> int:
        """How many requests the pair sent."""
        return self.request_counts()[(sample_id, epoch)]

    def override(self, sample_id: str, epoch: int, *behaviors: Behavior) -> None:
        """Answer the pair's next requests with these behaviours, the last one repeating."""
        if not behaviors:
            raise ValueError("override needs at least one Behavior")
        self._state.override((sample_id, epoch), behaviors)

    def clear_overrides(self) -> None:
        """Return every pair to its hash-decided behaviour."""
        self._state.clear_overrides()

    def expected_outcome(self, sample_id: str, epoch: int) -> Outcome:
        """The hash-decided outcome of the pair under this server's seed and rates."""
        cfg = self._config
        return expected_outcome(
            sample_id, epoch, seed=cfg.seed, error_rate=cfg.error_rate, wrong_rate=cfg.wrong_rate
        )

    def start(self) -> Self:
        """Bind the socket, start serving on a background thread and wait until ready."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        sock = listen(self.host, self._port)
        self._port = sock.getsockname()[1]
        if self._log_path is not None:
            self._state.open_log(self._log_path.open("a", encoding="utf-8"))
        self._thread = threading.Thread(
            target=self._run, args=(sock,), name=f"model-server-{self._port}", daemon=True
        )
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            raise RuntimeError("model server failed to start") from self._failure
        return self

    def stop(self) -> None:
        """Stop serving (aborting in-flight requests) and join the thread; idempotent."""
        loop, stopped, thread = self._loop, self._stopped, self._thread
        if loop is not None and stopped is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stopped.set)
        if thread is not None:
            thread.join()
        self._state.close_log()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self, sock: socket.socket) -> None:
        """Thread body: run the server on a fresh event loop until stopped."""
        try:
            asyncio.run(self._serve(sock))
        except BaseException as exc:  # reported to start(), which re-raises it
            self._failure = exc
        finally:
            self._ready.set()

    async def _serve(self, sock: socket.socket) -> None:
        """Serve until `stop()` sets the event."""
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        server = Http11Server(App(self._config, self._state))
        await server.start(sock)
        self._ready.set()
        try:
            await self._stopped.wait()
        finally:
            await server.close()
