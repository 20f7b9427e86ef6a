"""A store's files beside it: private copies (scratch) and whether another process holds it."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
import uuid
from pathlib import Path

__all__ = [
    "MOVED_ASIDE",
    "OPEN_PATHS",
    "held_elsewhere",
    "move_aside",
    "remove_dead_scratch",
    "scratch_path",
]

log = logging.getLogger(__name__)
_SCRATCH = ".scratch-"
OPEN_PATHS: set[Path] = set()  # the databases this process has open now
ASIDE = ".moved-aside"  # under the state directory: stores RocksDB refused, for inspection
_KEEP_ASIDE = 3  # the newest kept; older ones are removed
MOVED_ASIDE: list[str] = []  # where this process moved stores to (the newest _KEEP_ASIDE)


def move_aside(root: Path, path: Path) -> Path:
    """Move a store RocksDB refuses out of the way, under the state directory's moved-aside
    folder (the newest few are kept for inspection); where it went."""
    folder = root / ASIDE
    folder.mkdir(parents=True, exist_ok=True)
    name = "-".join(path.relative_to(root).parts)
    target = folder / f"{name}-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"
    shutil.move(str(path), str(target))
    kept = sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in kept[_KEEP_ASIDE:]:
        shutil.rmtree(old, ignore_errors=True)
    MOVED_ASIDE.append(str(target))
    del MOVED_ASIDE[:-_KEEP_ASIDE]
    return target


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
