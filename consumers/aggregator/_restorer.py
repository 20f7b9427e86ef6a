"""Restores newly assigned partitions' stores off the rebalance path, a thread each.

The rebalance callback starts them and returns at once; the consumer thread adopts each
finished one (`finished`) and starts reading its partition from where its state ends.
Meanwhile `/healthz` and the page show how far each has read its changelog.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from resultlog.consumers.aggregator._opener import Cancelled, StoreOpener
from resultlog.consumers.aggregator.store import LogIdentity, Opened

__all__ = ["Restore", "Restorer"]

log = logging.getLogger(__name__)


@dataclass
class Restore:
    """One partition's restore: its progress (changelog offsets), then its outcome."""

    partition: int
    bounds: tuple[int, int | None]
    read: int = 0
    total: int = 0
    opened: Opened | None = None
    identity: LogIdentity | None = None
    error: BaseException | None = None
    cancelled: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    def progress(self, read: int, total: int) -> None:
        """How far the changelog is read; raises Cancelled once the partition was revoked."""
        self.read, self.total = read, total
        if self.cancelled.is_set():
            raise Cancelled


class Restorer:
    """The restores under way, a thread each."""

    def __init__(self, opener: StoreOpener) -> None:
        self._opener = opener
        self._lock = threading.Lock()
        self._running: dict[int, Restore] = {}

    def start(self, bounds: dict[int, tuple[int, int | None]]) -> None:
        """Restore these partitions' stores, each on a thread of its own."""
        share = max(1, len(bounds))
        for partition, limits in sorted(bounds.items()):
            restore = Restore(partition, limits)
            with self._lock:
                self._running[partition] = restore
            threading.Thread(
                target=self._run, args=(restore, share), name=f"restore-{partition}", daemon=True
            ).start()

    def _run(self, restore: Restore, share: int) -> None:
        try:
            restore.opened, restore.identity = self._opener.open(
                restore.partition, restore.bounds, share, restore.progress
            )
            if restore.cancelled.is_set():
                restore.opened.store.close()
        except Cancelled:
            log.info("stopped restoring partition %d: revoked", restore.partition)
        except BaseException as exc:  # handed to the consumer thread, which stops
            restore.error = exc
        finally:
            restore.done.set()

    def finished(self) -> list[Restore]:
        """The restores that ended since the last call (cancelled ones left out)."""
        with self._lock:
            ended = [r for r in self._running.values() if r.done.is_set()]
            for restore in ended:
                del self._running[restore.partition]
        return [r for r in ended if not r.cancelled.is_set()]

    def restoring(self) -> dict[int, tuple[int, int]]:
        """Per partition under way: changelog records read and to read."""
        with self._lock:
            return {p: (r.read, r.total) for p, r in self._running.items()}

    def cancel(self, partitions: set[int]) -> None:
        """Stop restoring revoked partitions (their stores are closed, nothing written)."""
        with self._lock:
            for partition in partitions:
                restore = self._running.pop(partition, None)
                if restore is not None:
                    restore.cancelled.set()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Cancel every restore and wait for their threads."""
        with self._lock:
            running = list(self._running.values())
            self._running.clear()
        for restore in running:
            restore.cancelled.set()
        for restore in running:
            restore.done.wait(timeout_s)
