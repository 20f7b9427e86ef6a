"""A minimal asyncio HTTP/1.1 server on h11 that can also fail like a broken network."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Literal

import h11

__all__ = ["Http11Server", "HttpReply", "HttpRequest", "NetworkFault", "listen"]

NetworkFault = Literal["reset", "close"]
# A burst of concurrent connects beyond the backlog has SYNs dropped and retried after
# a second, which a client sees as connect timeouts.
_BACKLOG = 1024
_MAX_BODY = 16 * 1024 * 1024
_READ_SIZE = 64 * 1024


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """A complete request: method, path without the query, and body."""

    method: str
    path: str
    body: bytes


@dataclass(frozen=True, slots=True)
class HttpReply:
    """A response to send, or a network fault to inflict instead of any response."""

    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    fault: NetworkFault | None = None


Handler = Callable[[HttpRequest], Awaitable[HttpReply]]


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: the OS chooses), IPv4 or IPv6."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=_BACKLOG)


class Http11Server:
    """Serves keep-alive HTTP/1.1 on a listening socket, one task per connection."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, sock: socket.socket) -> None:
        """Start accepting connections on an already bound, listening socket."""
        self._server = await asyncio.start_server(self._connection, sock=sock, backlog=_BACKLOG)

    async def close(self) -> None:
        """Stop accepting, abort in-flight connections (hanging handlers too) and wait."""
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve requests on one connection until either side closes it."""
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = h11.Connection(h11.SERVER)
        try:
            while await self._exchange(conn, reader, writer):
                conn.start_next_cycle()
        except (ConnectionError, h11.ProtocolError):
            pass  # the client went away or spoke broken HTTP: just drop the connection
        except asyncio.CancelledError:
            # close() cancels in-flight connections; ending quietly keeps asyncio's stream
            # callback from logging every cancelled connection as an error.
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _exchange(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Read one request, answer it; True when the connection can serve another."""
        request = await _read_request(conn, reader)
        if request is None:
            return False
        reply = await self._handler(request)
        if reply.fault is not None:
            _inflict(reply.fault, writer)
            return False
        await _send(conn, writer, reply)
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE


async def _read_request(conn: h11.Connection, reader: asyncio.StreamReader) -> HttpRequest | None:
    """Read events up to the end of one request; None when the client closed first."""
    head: h11.Request | None = None
    chunks: list[bytes] = []
    size = 0
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(_READ_SIZE))
        elif isinstance(event, h11.Request):
            head = event
        elif isinstance(event, h11.Data):
            size += len(event.data)
            if size > _MAX_BODY:
                raise h11.RemoteProtocolError("request body too large")
            chunks.append(event.data)
        elif isinstance(event, h11.EndOfMessage) and head is not None:
            path = head.target.decode("ascii", "replace").split("?", 1)[0]
            return HttpRequest(head.method.decode("ascii"), path, b"".join(chunks))
        else:
            return None


async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, reply: HttpReply) -> None:
    """Write a complete response with a Content-Length."""
    headers = [
        ("content-type", reply.content_type),
        ("content-length", str(len(reply.body))),
        *reply.headers,
    ]
    response = h11.Response(status_code=reply.status, headers=headers, reason=_reason(reply.status))
    events = (response, h11.Data(data=reply.body), h11.EndOfMessage())
    # One write: a head sent apart from its body meets the peer's delayed ACK (~40 ms).
    writer.write(b"".join(conn.send(event) or b"" for event in events))
    await writer.drain()


def _reason(status: int) -> bytes:
    """The reason phrase for a status code."""
    try:
        return HTTPStatus(status).phrase.encode("ascii")
    except ValueError:
        return b""


def _inflict(fault: NetworkFault, writer: asyncio.StreamWriter) -> None:
    """Drop the connection without a response: an RST for reset, a FIN for close."""
    if fault == "reset":
        sock = writer.get_extra_info("socket")
        with contextlib.suppress(OSError):
            # Linger with a zero timeout makes close() send RST instead of FIN.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()
    else:
        writer.close()
