"""Restores newly assigned partitions' stores off the rebalance path, a thread each.

The rebalance callback starts them and returns at once; the consumer thread adopts each
finished one (`finished`) and starts reading its partition from where its state ends.
Meanwhile `/healthz` and the page show how far each has read its changelog. With standby
replicas, each restore first has the keeper release its warm copy of the partition (RocksDB
locks a store's directory), so the open finds that copy and reads only the changelog's tail.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from resultlog.consumers.aggregator.store._meta import LogIdentity
from resultlog.consumers.aggregator.store._open import Opened
from resultlog.consumers.aggregator.store._opener import Cancelled, StoreOpener

__all__ = ["Restore", "Restorer", "Standby"]

log = logging.getLogger(__name__)


class Standby(Protocol):
    """What the restores tell the keeper of warm copies (see `standby`)."""

    def assigned(self, partitions: Iterable[int]) -> None:
        """This instance takes these partitions."""
        ...

    def release(self, partition: int) -> None:
        """Close the partition's warm copy: it is about to be opened actively."""
        ...

    def revoked(self, partitions: Iterable[int]) -> None:
        """This instance gave these partitions up."""
        ...

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop keeping copies."""
        ...


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
    """The restores under way, a thread each; and the standby keeper, told of each change."""

    def __init__(self, opener: StoreOpener, standby: Standby | None = None) -> None:
        self._opener = opener
        self._standby = standby
        self._lock = threading.Lock()
        self._running: dict[int, Restore] = {}

    def start(self, bounds: dict[int, tuple[int, int | None]]) -> None:
        """Restore these partitions' stores, each on a thread of its own."""
        if self._standby is not None:
            self._standby.assigned(bounds)
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
            if self._standby is not None:
                self._standby.release(restore.partition)
            restore.opened, restore.identity = self._opener.open(
                restore.partition, restore.bounds, share, restore.progress
            )
        except Cancelled:
            log.info("stopped restoring partition %d: revoked", restore.partition)
        except BaseException as exc:  # handed to the consumer thread, which stops
            restore.error = exc
        finally:
            with self._lock:  # cancelled before or after: exactly one of us closes the store
                restore.done.set()
                unwanted = restore.cancelled.is_set()
            if unwanted and restore.opened is not None:
                restore.opened.store.close()

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
        ended: list[Restore] = []
        with self._lock:
            for partition in partitions:
                restore = self._running.pop(partition, None)
                if restore is not None:
                    restore.cancelled.set()
                    if restore.done.is_set():  # restored, not yet adopted: nobody else will
                        ended.append(restore)
        for restore in ended:
            if restore.opened is not None:
                restore.opened.store.close()
        if self._standby is not None:
            self._standby.revoked(partitions)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Cancel every restore and wait for their threads; stop keeping warm copies."""
        if self._standby is not None:
            self._standby.stop(timeout_s)
        with self._lock:
            running = list(self._running.values())
        self.cancel({restore.partition for restore in running})
        for restore in running:
            restore.done.wait(timeout_s)
