"""Processes and ports of the local Kafka nodes: liveness, reaping, free loopback ports."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from pathlib import Path

__all__ = [
    "free_port",
    "free_ports",
    "is_kafka_process",
    "port_is_free",
    "reap",
    "tied",
    "wait_exit",
    "wait_ports_free",
]


# Run before the command: SIGTERM to it when its parent dies (Linux), then exec it. A step
# of its own, not a preexec_fn: forking a process with threads must not run Python in between.
_TIE = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None).prctl(1, signal.SIGTERM)\n"  # PR_SET_PDEATHSIG
    "except (OSError, AttributeError):\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit(143)\n"  # the parent died before the tie held
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def tied(command: list[str]) -> list[str]:
    """`command` such that it gets SIGTERM when this process dies, however it dies."""
    return [sys.executable, "-c", _TIE, str(os.getpid()), *command]


def is_kafka_process(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    # The java launcher may re-exec itself while starting; its cmdline is empty meanwhile.
    return (not cmdline or b"kafka.Kafka" in cmdline) and not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap(pid)
        if not is_kafka_process(pid):
            return True
        time.sleep(0.1)
    return False


def reap(pid: int) -> None:
    # A node started by this very process stays a zombie until waited for.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def free_port() -> int:
    """A port on 127.0.0.1 that the OS says is free now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """Distinct ports on 127.0.0.1 that the OS says are free now."""
    # All sockets stay open until every port is known, or the OS may hand one out twice.
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the broker binds: connections of a stopped broker in TIME_WAIT must not count.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def wait_ports_free(ports: tuple[int, ...], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not all(map(port_is_free, ports)) and time.monotonic() < deadline:
        time.sleep(0.05)
