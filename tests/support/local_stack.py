"""The files of the local stack's contract (docs/local-stack.md), made by hand for tests."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["cluster_file", "dead_pid", "held_up_lock", "stand_in_node"]


def cluster_file(directory: Path, *, port: int, pid: int, tls: bool = False) -> None:
    """The two files of the contract: cluster.json and node-1/broker.pid."""
    node = {"node_id": 1, "port": port, "controller_port": port + 1}
    state = {"cluster_id": "x", "nodes": [node], "sasl": False, "tls": tls}
    (directory / "cluster.json").write_text(json.dumps(state))
    (directory / "node-1").mkdir(exist_ok=True)
    (directory / "node-1" / "broker.pid").write_text(str(pid))


@contextmanager
def stand_in_node() -> Iterator[int]:
    """A live process whose command line names kafka.Kafka, as a node's does."""
    code = "import time; time.sleep(120)"
    process = subprocess.Popen([sys.executable, "-c", code, "kafka.Kafka"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


@contextmanager
def held_up_lock(directory: Path) -> Iterator[None]:
    """The directory's `up` lock held, as a running `up` holds it."""
    with (directory / "up.json").open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write(json.dumps({"pid": os.getpid()}))
        lock.flush()
        yield
    (directory / "up.json").unlink()
