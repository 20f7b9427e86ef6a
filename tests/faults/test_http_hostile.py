"""The aggregator's HTTP server under hostile clients, with real sockets.

Slow request heads, more connections than file descriptors, clients that never read their
response and 60 KB paths: `/healthz` keeps answering within a second, the server cuts what it
must, stderr stays small and memory flat.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from resultlog.consumers.aggregator import Aggregator, HttpServer, create_app
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.audit import report
from tests.support.cli import child_env, cli_argv
from tests.support.kafka import write_many
from tests.support.records import make_record
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

HEAD_TIMEOUT_S = 2.0
PARTIAL_HEAD = b"GET /healthz HTTP/1.1\r\nHost: slow\r\n"


@contextlib.contextmanager
def _serving(
    settings: Settings,
    *,
    header_timeout_s: float = 10.0,
    request_timeout_s: float = 60.0,
    max_connections: int = 512,
) -> Iterator[str]:
    """A real aggregator behind a server with the given limits, once ready."""
    with Aggregator(KafkaConnection(settings), publish_interval_s=0.05) as aggregator:
        server = HttpServer(
            create_app(aggregator),
            "127.0.0.1",
            0,
            header_timeout_s=header_timeout_s,
            request_timeout_s=request_timeout_s,
            max_connections=max_connections,
        )
        server.start_in_thread()
        try:
            wait_for(lambda: aggregator.health().ready, "the aggregator to be ready")
            yield server.url
        finally:
            server.close()


def _connect(url: str, first: bytes = b"") -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    if first:
        sock.sendall(first)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed the connection (without waiting for it to)."""
    sock.setblocking(False)
    try:
        return sock.recv(1 << 16) == b""
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True


def _healthz_s(url: str) -> float:
    started = time.monotonic()
    assert httpx.get(url + "/healthz", timeout=5).status_code == 200
    return time.monotonic() - started


def test_slow_request_heads_are_cut_and_never_starve_healthz(settings: Settings) -> None:
    with _serving(settings, header_timeout_s=HEAD_TIMEOUT_S, max_connections=40) as url:
        slow = [_connect(url, PARTIAL_HEAD) for _ in range(50)]
        opened = time.monotonic()
        worst = 0.0
        while time.monotonic() - opened < HEAD_TIMEOUT_S + 1.5:
            for sock in slow:  # a header line a byte at a time, never the blank line
                with contextlib.suppress(OSError):
                    sock.send(b"X")
            worst = max(worst, _healthz_s(url))
            time.sleep(0.2)
        closed_s = time.monotonic() - opened
        assert all(_closed_by_server(sock) for sock in slow)
        for sock in slow:
            sock.close()
    assert worst < 2.0, worst  # about 0.1 s on an idle machine
    report("http-slow-heads", connections=50, cut_within_s=f"{closed_s:.1f}",
           worst_healthz_s=f"{worst:.2f}")  # fmt: skip


def test_a_client_that_never_reads_its_response_is_cut(settings: Settings) -> None:
    runs = [RunKey(f"big-{i:04d}-{'x' * 250}", "b" * 256, "m" * 256) for i in range(1000)]
    write_many(settings, [make_record(0, 0, run_key=run_key) for run_key in runs])
    with _serving(settings, request_timeout_s=2.0) as url:
        wait_for(
            lambda: httpx.get(url + "/runs?limit=1").headers["x-total-count"] == "1000",
            "the runs",
        )
        readers = []
        for _ in range(5):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            host, port = url.removeprefix("http://").split(":")
            sock.connect((host, int(port)))
            sock.sendall(b"GET /runs?limit=1000 HTTP/1.1\r\nHost: x\r\n\r\n")
            readers.append(sock)
        time.sleep(2.0 + 5.0)  # the request deadline, or the keep-alive one once it is out
        worst = _healthz_s(url)
        for sock in readers:  # the server closed it: what was in flight, then the end
            sock.settimeout(5)
            with contextlib.suppress(ConnectionResetError):
                while sock.recv(1 << 16):
                    pass
            sock.close()
    assert worst < 2.0


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1])


def _low_descriptor_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def test_more_connections_than_descriptors_and_huge_paths(
    settings: Settings, tmp_path: os.PathLike[str]
) -> None:
    stderr_path = os.path.join(tmp_path, "stderr")
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            cli_argv("aggregator", "--http", "127.0.0.1:0"),
            env=child_env(settings),
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            preexec_fn=_low_descriptor_limit,  # noqa: PLW1509
        )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split()[-1]
        wait_for(lambda: httpx.get(url + "/healthz", timeout=5).status_code == 200, "ready")
        idle = [_connect(url) for _ in range(600)]  # more than 256 descriptors
        during = [_healthz_s(url) for _ in range(10)]
        time.sleep(5.0)
        after = [_healthz_s(url) for _ in range(10)]

        worst = max(during + after)
        still_open = sum(not _closed_by_server(sock) for sock in idle)
        for sock in idle:
            sock.close()

        before = _rss_kib(process.pid)
        for i in range(300):
            with contextlib.closing(_connect(url)) as sock:
                run_id = f"{i:05d}" + "r" * 60_000
                sock.sendall(f"GET /runs/{run_id}/arith/m HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                sock.settimeout(5)
                assert sock.recv(64).startswith(b"HTTP/1.1 431")
        grown_kib = _rss_kib(process.pid) - before
        assert _healthz_s(url) < 1.0
        assert process.poll() is None
    finally:
        process.terminate()
        process.wait(30)
    stderr_bytes = os.path.getsize(stderr_path)
    assert worst < 2.0, worst  # about 0.1 s on an idle machine
    assert still_open < 256, still_open
    assert stderr_bytes < 20_000, stderr_bytes
    assert grown_kib < 10_000, grown_kib
    report("http-descriptors", connections=600, nofile=256, kept_open=still_open,
           worst_healthz_s=f"{worst:.2f}", stderr_bytes=stderr_bytes,
           rss_growth_kib_after_300_60kb_paths=grown_kib)  # fmt: skip
