"""The aggregator's HTTP server: uvicorn (h11) hardened against hostile or broken clients.

What a client cannot do to the server, so that `/healthz` is always answered:
- hold a connection without sending a whole request head: `header_timeout_s` after its first
  byte (or after connecting) the connection is closed; idle keep-alive connections are closed
  after `IDLE_TIMEOUT_S`, and a request whose response is not out within `request_timeout_s`
  (a client that does not read it) is cut;
- open more connections than the process has file descriptors for: connections are capped
  below RLIMIT_NOFILE (minus what the process already uses and a reserve for its Kafka
  clients); at the cap a new connection evicts the oldest one that is waiting for a request
  head, or is refused when every connection is busy;
- send a request head larger than `MAX_HEAD_BYTES` (431), or a run key part longer than the
  command line allows (400, before any cache or lookup sees it);
- fill stderr: the server's own warnings and the event loop's accept errors are logged at most
  once per `LOG_EVERY_S` per message, with the count of those left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource
import socket
import threading
import time
from collections.abc import Callable, Iterator

import h11
import uvicorn
from starlette.applications import Starlette
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HttpServer"]

MAX_CONNECTIONS = 512
HEADER_TIMEOUT_S = 10.0
IDLE_TIMEOUT_S = 5
REQUEST_TIMEOUT_S = 60.0
MAX_HEAD_BYTES = 16 * 1024
LOG_EVERY_S = 10.0
_FD_RESERVE = 64  # descriptors kept free for Kafka clients, files and the accept itself
_MIN_CONNECTIONS = 8
_BACKLOG = 128


class _Connections:
    """The open connections of one server, oldest first, and their cap."""

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.cap = maximum
        self.open: dict[_GuardedProtocol, None] = {}

    def fit_to_descriptors(self) -> None:
        """Lower the cap below what RLIMIT_NOFILE leaves free now."""
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return
        free = soft - _open_descriptors() - _FD_RESERVE
        self.cap = max(_MIN_CONNECTIONS, min(self.maximum, free))

    def admit(self, connection: _GuardedProtocol) -> bool:
        """Make room for a new connection by evicting idle old ones; False if none is idle."""
        while len(self.open) >= self.cap:
            oldest_idle = next((c for c in self.open if c.waiting_for_head), None)
            if oldest_idle is None:
                return False
            self.open.pop(oldest_idle, None)
            oldest_idle.transport.close()
        self.open[connection] = None
        return True

    def forget(self, connection: _GuardedProtocol) -> None:
        self.open.pop(connection, None)


def _open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:  # not Linux: assume a modest number
        return 64


class _GuardedProtocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head deadline, a request deadline and the cap."""

    guard: _Connections
    header_timeout_s: float
    request_timeout_s: float

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._request_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        if not self.guard.admit(self):
            transport.abort()  # every connection is busy with a request: refuse this one
            return
        self._watch()

    def data_received(self, data: bytes) -> None:
        if self.waiting_for_head:
            # h11 bounds a head that arrives in pieces, not one that arrives whole.
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                self._refuse_head()
                return
        super().data_received(data)
        self._watch()

    def _refuse_head(self) -> None:
        body = b'{"error": "head_too_large", "detail": "the request head is over 16 KiB"}'
        self.transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json"
            b"\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
        )
        self.transport.close()

    def on_response_complete(self) -> None:
        self._request_timer = _cancel(self._request_timer)
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.forget(self)
        self._head_timer = _cancel(self._head_timer)
        self._request_timer = _cancel(self._request_timer)
        super().connection_lost(exc)

    @property
    def waiting_for_head(self) -> bool:
        """No request in progress: connected or kept alive, maybe partway through a head."""
        in_progress = self.cycle is not None and not self.cycle.response_complete
        return self.conn.their_state is h11.IDLE and not in_progress

    def _watch(self) -> None:
        """Arm the deadline of what the connection is doing now."""
        if self.transport.is_closing():
            return
        if self.waiting_for_head:
            # From the connection or the first byte of a head (uvicorn's keep-alive timer
            # covers the silence between requests; this one, a head that never ends).
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(self.header_timeout_s, self._cut)
        else:
            self._head_timer = _cancel(self._head_timer)
            self._head_bytes = 0
            if self._request_timer is None:
                self._request_timer = self.loop.call_later(self.request_timeout_s, self._cut)

    def _cut(self) -> None:
        self._head_timer = self._request_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def _cancel(timer: asyncio.TimerHandle | None) -> asyncio.TimerHandle | None:
    """Cancel a timer if set; None, for the attribute that held it."""
    if timer is not None:
        timer.cancel()
    return None


def _protocol_class(
    connections: _Connections, header_timeout_s: float, request_timeout_s: float
) -> type[H11Protocol]:
    """The protocol class of one server (uvicorn builds one instance per connection)."""

    class GuardedH11Protocol(_GuardedProtocol):
        pass

    GuardedH11Protocol.guard = connections
    GuardedH11Protocol.header_timeout_s = header_timeout_s
    GuardedH11Protocol.request_timeout_s = request_timeout_s
    return GuardedH11Protocol


class _RateLimited(logging.Filter):
    """At most one record per message every LOG_EVERY_S; the next says how many were left out."""

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = str(record.msg)
        now = time.monotonic()
        with self._lock:
            last, left_out = self._last.get(key, (-LOG_EVERY_S, 0))
            if now - last < LOG_EVERY_S:
                self._last[key] = (last, left_out + 1)
                return False
            self._last[key] = (now, 0)
        if left_out:
            record.msg = f"{record.msg} ({left_out} more like this in the last {LOG_EVERY_S:g}s)"
        return True


_LOG_FILTER = _RateLimited()
_RATE_LIMITED_LOGGERS = ("uvicorn.error", "asyncio")  # asyncio: accept() out of descriptors


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the caller decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    """uvicorn on a socket bound up front, so port 0 is resolved before serving starts."""

    def __init__(
        self,
        app: Starlette,
        host: str = "127.0.0.1",
        port: int = 8080,
        *,
        max_connections: int = MAX_CONNECTIONS,
        header_timeout_s: float = HEADER_TIMEOUT_S,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        tls_certificate: str | None = None,
        tls_key: str | None = None,
    ) -> None:
        self._socket = _listen(host, port)
        self._scheme = "https" if tls_certificate else "http"
        for name in _RATE_LIMITED_LOGGERS:
            logging.getLogger(name).addFilter(_LOG_FILTER)  # once: addFilter skips duplicates
        self.connections = _Connections(max_connections)
        config = uvicorn.Config(
            app,
            http=_protocol_class(self.connections, header_timeout_s, request_timeout_s),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=5,
            timeout_keep_alive=IDLE_TIMEOUT_S,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
            backlog=_BACKLOG,
            ssl_certfile=tls_certificate,
            ssl_keyfile=tls_key,
        )
        self._server = _Server(config)
        self._app = app
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The bound address, e.g. http://127.0.0.1:43123."""
        host, port = self._socket.getsockname()[:2]
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        return f"{self._scheme}://{where}"

    @property
    def started(self) -> bool:
        """True once uvicorn accepts connections."""
        return bool(self._server.started)

    async def serve(self, should_stop: Callable[[], bool] | None = None) -> None:
        """Serve until `stop()` is called or `should_stop()` turns true."""
        # Sized now: the process's Kafka clients have opened their descriptors by this time.
        self.connections.fit_to_descriptors()
        task = asyncio.create_task(self._server.serve(sockets=[self._socket]))
        while not task.done():
            if should_stop is not None and should_stop():
                self.stop()
            await asyncio.wait({task}, timeout=0.1)
        await task

    def stop(self) -> None:
        """Ask the server to finish (thread-safe)."""
        self._server.should_exit = True

    def start_in_thread(self, timeout_s: float = 10.0) -> None:
        """Serve from a background thread (tests, benchmarks); wait until it accepts."""
        self._thread = threading.Thread(
            target=asyncio.run, args=(self.serve(),), name="resultlog-http", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise TimeoutError("the HTTP server did not start")
            time.sleep(0.01)

    def close(self) -> None:
        """Stop a server started with `start_in_thread`; release the socket and the app's
        summaries reader."""
        self.stop()
        if self._thread is not None:
            self._thread.join(10)
        self._socket.close()
        published = getattr(self._app.state, "published", None)
        if published is not None:
            published.close()


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket; OSError if the address cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # An explicit IPPROTO_TCP: asyncio sets TCP_NODELAY only on accepted sockets of that
    # protocol, and without it each keep-alive response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock
