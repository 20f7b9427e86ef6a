"""An HTTP proxy in front of a real schema registry that a test can stall or make answer 503."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx

_STALL_LIMIT_S = 120.0  # a stalled request gives up on its own eventually


@dataclass
class _Faults:
    """What the proxy does to the next requests (guarded by `lock`)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    failures: dict[str, int] = field(default_factory=dict)  # path prefix -> 503s left
    released: threading.Event = field(default_factory=threading.Event)
    seen: list[tuple[str, str, int]] = field(default_factory=list)  # method, path, status

    def take_failure(self, path: str) -> bool:
        with self.lock:
            for prefix, left in self.failures.items():
                if path.startswith(prefix) and left > 0:
                    self.failures[prefix] = left - 1
                    return True
        return False


class RegistryProxy:
    """Forwards every request to `upstream` (a registry API URL) unless told otherwise."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._api_path = parts.path
        self.faults = _Faults()
        self.faults.released.set()
        self._client = httpx.Client(base_url=self._origin, timeout=30)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The registry API URL through the proxy."""
        return f"http://127.0.0.1:{self._server.server_address[1]}{self._api_path}"

    def fail_next(self, path_part: str, count: int) -> None:
        """Answer 503 to the next `count` requests whose path (under the API) starts so."""
        with self.faults.lock:
            self.faults.failures[self._api_path + path_part] = count

    def stall(self) -> None:
        """Hold every request from now on without answering, until `release`."""
        self.faults.released.clear()

    def release(self) -> None:
        """Serve held and new requests again."""
        self.faults.released.set()

    def answered(self, status: int, path_part: str) -> int:
        """How many requests under `path_part` were answered with `status`."""
        prefix = self._api_path + path_part
        with self.faults.lock:
            return sum(1 for _, path, code in self.faults.seen if code == status
                       and path.startswith(prefix))  # fmt: skip

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

            def _forward(self) -> None:
                faults = proxy.faults
                if not faults.released.wait(_STALL_LIMIT_S):
                    return
                if faults.take_failure(self.path):
                    status, body = 503, b'{"error_code": 50301, "message": "injected"}'
                    content_type = "application/json"
                else:
                    status, body, content_type = self._upstream()
                with faults.lock:
                    faults.seen.append((self.command, self.path, status))
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client gave up (its timeout): nothing to answer

            def _upstream(self) -> tuple[int, bytes, str]:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    upstream = proxy._client.request(
                        self.command,
                        self.path,
                        content=self.rfile.read(length) if length else None,
                        headers=_forwarded(self.headers.items()),
                    )
                except httpx.HTTPError as exc:  # the proxy is closing, or the registry went
                    return 502, str(exc).encode(), "text/plain"
                content_type = upstream.headers.get("content-type", "application/json")
                return upstream.status_code, upstream.content, content_type

            do_GET = do_POST = do_PUT = do_DELETE = _forward  # noqa: N815

        return Handler

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self._client.close()


def _forwarded(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The request headers the registry needs."""
    return {k: v for k, v in headers if k.lower() in ("content-type", "accept")}


@contextmanager
def registry_proxy(upstream: str) -> Iterator[RegistryProxy]:
    """A running proxy in front of `upstream`, closed at the end."""
    proxy = RegistryProxy(upstream)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.close()
