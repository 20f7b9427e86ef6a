"""A store's files beside it: private copies (scratch) and whether another process holds it."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import uuid
from pathlib import Path

__all__ = ["OPEN_PATHS", "held_elsewhere", "remove_dead_scratch", "scratch_path"]

log = logging.getLogger(__name__)
_SCRATCH = ".scratch-"
OPEN_PATHS: set[Path] = set()  # the databases this process has open now


def scratch_path(path: Path) -> Path:
    """A private directory beside `path` for when `path` is locked by another process."""
    return path.with_name(f"{path.name}{_SCRATCH}{os.getpid()}-{uuid.uuid4().hex[:8]}")


def remove_dead_scratch(path: Path) -> None:
    """Remove the private copies beside `path` whose process is gone (killed: never closed)."""
    for scratch in path.parent.glob(f"{path.name}{_SCRATCH}*"):
        pid = scratch.name.removeprefix(f"{path.name}{_SCRATCH}").partition("-")[0]
        if pid.isdecimal() and not _alive(int(pid)):
            log.info("removing %s, left by process %s", scratch, pid)
            shutil.rmtree(scratch, ignore_errors=True)


def held_elsewhere(path: Path) -> bool:
    """Whether another holder has the database at `path` (RocksDB's lock on its LOCK file).

    Never probed for a database this process has open: closing any descriptor of a file
    drops every POSIX lock the process holds on it, RocksDB's own among them."""
    if path in OPEN_PATHS:
        return True
    try:
        fd = os.open(path / "LOCK", os.O_RDWR)
    except OSError:
        return False  # no database yet (or none to probe): opening it says the rest
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # the probe's own lock goes with it
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True
