"""The standby keeper: a thread that places, opens, tails and closes an instance's warm copies.

It never runs on the consumer thread nor inside a rebalance callback: the callbacks (through
the Restorer) only note the partitions this instance takes or gives up and its member id, and
ask for a look at the group soon. A warm copy never serves, publishes or writes a changelog.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from confluent_kafka import Consumer

from resultlog.consumers.aggregator._health import StandbyHealth
from resultlog.consumers.aggregator._kafka import delete_retention_ms, watermarks
from resultlog.consumers.aggregator.standby._copy import Released, WarmCopy
from resultlog.consumers.aggregator.standby._describer import GroupDescriber
from resultlog.consumers.aggregator.standby._placement import standby_partitions
from resultlog.consumers.aggregator.store import (
    KafkaChangelog,
    LogIdentity,
    PartitionStore,
    Refused,
    StoreSpace,
    destroy,
    trust,
)
from resultlog.kafka import KafkaConnection

__all__ = ["StandbyKeeper"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_TAIL_S = 0.5  # how often each copy reads its changelog's new flushes
_PLACE_S = 5.0  # how often the group's assignment is looked at
_AFTER_REBALANCE_S = 1.0  # and how soon after a rebalance (again while it is not stable)
_RETRY_S = 30.0  # after a failure to connect, or a refused copy, before trying again
_LOG_EVERY_S = 30.0


@dataclass
class _Clients:
    """What the keeper's thread reads with."""

    describer: GroupDescriber
    reader: Consumer  # results watermarks
    changelog: KafkaChangelog
    identity: LogIdentity
    max_age_ms: int

    def close(self) -> None:
        self.describer.close()
        self.changelog.close()
        self.reader.close()


class StandbyKeeper:
    """Keeps warm copies of `replicas` other members' partitions (none when 0)."""

    def __init__(
        self, kafka: KafkaConnection, consumer: Consumer, group: str, root: Path, replicas: int
    ) -> None:
        self.replicas = replicas
        self._kafka = kafka
        self._topic = kafka.results_topic
        self._consumer = consumer
        self._group = group
        self._root = root
        self._memory_bytes = kafka.settings.aggregator_store_memory_mb << 20
        self._lock = threading.Lock()  # guards the fields below, never held while reading
        self._copies: dict[int, WarmCopy] = {}
        self._claimed: set[int] = set()  # this instance's own: never opened as a copy
        self._member = ""
        self._place_at = 0.0
        self._retry_at: dict[int, float] = {}
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._logged_at = -_LOG_EVERY_S

    # -- the rebalance callbacks' hooks (the consumer thread: nothing slow) -----------------

    def assigned(self, partitions: Iterable[int]) -> None:
        """This instance takes these partitions: keep no copy of them; look at the group soon
        (the first call starts the keeper's thread)."""
        if self.replicas <= 0 or self._stopped.is_set():
            return
        self._noted(partitions, claimed=True)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="resultlog-standby", daemon=True)
            self._thread.start()

    def revoked(self, partitions: Iterable[int]) -> None:
        """This instance gave these partitions up (their stores are closed or closing)."""
        if self.replicas > 0:
            self._noted(partitions, claimed=False)

    def _noted(self, partitions: Iterable[int], *, claimed: bool) -> None:
        if self._stopped.is_set():
            return
        # The member id is read here, on the consumer thread: the keeper's own thread must
        # never touch the consumer, which the consumer thread may be closing.
        try:
            member = self._consumer.memberid() or ""
        except RuntimeError:  # closed
            return
        with self._lock:
            if claimed:
                self._claimed.update(partitions)
            else:
                self._claimed.difference_update(partitions)
            self._member = member
            self._place_at = min(self._place_at, time.monotonic() + _AFTER_REBALANCE_S)

    # -- any thread ---------------------------------------------------------------------------

    def release(self, partition: int) -> None:
        """Close the partition's warm copy (RocksDB locks its directory): this instance is
        about to open it actively. Waits for a read under way to stop at its next batch."""
        with self._lock:
            self._claimed.add(partition)
            copy = self._copies.pop(partition, None)
        if copy is None:
            return
        copy.releasing = True
        with copy.lock:
            if copy.store is not None:
                log.info(
                    "handing the warm copy of %s[%d] over at changelog offset %s of %d",
                    self._topic, partition, copy.held(), copy.end,
                )  # fmt: skip
                copy.store.close()
                copy.store = None

    def health(self) -> tuple[StandbyHealth, ...]:
        """The partitions kept warm (their copies open), and how far behind each is."""
        with self._lock:
            copies = sorted(self._copies.values(), key=lambda c: c.partition)
        return tuple(
            StandbyHealth(c.partition, c.owner, c.offset, c.end)
            for c in copies
            if c.store is not None
        )

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop keeping copies and close them (their directories stay)."""
        self._stopped.set()
        with self._lock:
            for copy in self._copies.values():
                copy.releasing = True
        if self._thread is not None:
            self._thread.join(timeout_s)

    # -- the keeper's thread --------------------------------------------------------------

    def _run(self) -> None:
        clients: _Clients | None = None
        try:
            while not self._stopped.is_set():
                if clients is None:
                    clients = self._attempt(self._connect)
                    if clients is None:
                        self._stopped.wait(_RETRY_S)
                        continue
                if time.monotonic() >= self._place_at:
                    self._attempt(lambda: self._place(clients))  # noqa: B023 - called at once
                with self._lock:
                    copies = list(self._copies.values())
                behind = [self._attempt(lambda: self._tail(clients, copy)) for copy in copies]  # noqa: B023
                if not any(behind):  # else catching up: on at once
                    self._stopped.wait(_TAIL_S)
        finally:
            with self._lock:
                copies = list(self._copies.values())
                self._copies.clear()
            for copy in copies:
                self._close(copy)
            if clients is not None:
                clients.close()

    def _attempt(self, step: Callable[[], T]) -> T | None:
        """Run a step; a failure is said (every so often) and the step tried again later: a
        standby never stops the aggregator."""
        try:
            return step()
        except Released:
            return None
        except Exception as exc:
            if time.monotonic() - self._logged_at >= _LOG_EVERY_S:
                self._logged_at = time.monotonic()
                log.warning("standby replicas of %s: %s (will try again)", self._topic, exc)
            return None

    def _connect(self) -> _Clients:
        kafka = self._kafka
        partitions = kafka.partition_count(self._topic)
        cluster_id, topic_id = kafka.topic_identity(self._topic)
        identity = LogIdentity(cluster_id, self._topic, topic_id, partitions)
        changelog = KafkaChangelog(kafka)
        describer = GroupDescriber(kafka.settings.client_config())
        return _Clients(describer, kafka.reader(), changelog, identity, delete_retention_ms(kafka))

    def _place(self, clients: _Clients) -> None:
        """Open the copies the group's assignment wants of this instance, close the others."""
        now = time.monotonic()
        view = clients.describer.describe(self._group, self._topic)
        with self._lock:
            self._place_at = now + (_AFTER_REBALANCE_S if view is None else _PLACE_S)
            me = None if view is None else view.names.get(self._member)
            if view is None or me is None:  # rebalancing, or this member not in it yet
                return
            wanted = standby_partitions(view.partitions, me, self.replicas)
            wanted = {p: owner for p, owner in wanted.items() if p not in self._claimed}
            gone = [copy for p, copy in self._copies.items() if p not in wanted]
            for copy in gone:
                del self._copies[copy.partition]
            for partition, owner in wanted.items():
                if partition in self._copies:
                    self._copies[partition].owner = owner
        for copy in gone:
            log.info("no longer keeping %s[%d] warm", self._topic, copy.partition)
            self._close(copy)
        for partition, owner in sorted(wanted.items()):
            if partition not in self._copies and self._retry_at.get(partition, 0.0) <= now:
                self._open(clients, partition, owner)

    def _open(self, clients: _Clients, partition: int, owner: str) -> None:
        copy = WarmCopy(partition, owner)
        with copy.lock:
            with self._lock:
                if partition in self._claimed or self._stopped.is_set():
                    return
                self._copies[partition] = copy
            try:
                copy.store, copy.offset, copy.end = self._opened(clients, partition)
            except BaseException:
                self._forget(copy)
                raise
        log.info(
            "keeping %s[%d] of %s warm from changelog offset %d of %d",
            self._topic, partition, owner, copy.offset, copy.end,
        )  # fmt: skip

    def _opened(self, clients: _Clients, partition: int) -> tuple[PartitionStore, int, int]:
        """The partition's store, and the changelog offset to read it on from, and the end."""
        cluster_id, topic_id = self._kafka.topic_identity(self._topic)  # it may be another now
        identity = LogIdentity(cluster_id, self._topic, topic_id, clients.identity.partitions)
        clients.identity = identity
        clients.changelog.identify()  # the changelog too may be another topic now
        space = StoreSpace(self._root, clients.max_age_ms, 1, self._memory_bytes)
        bounds = watermarks(clients.reader, self._topic, partition)
        trusted = trust(space, identity, partition, bounds, clients.changelog, active=False)
        store = trusted.opened.store
        if store.scratch:  # this process still held it (an active store closing): not now
            store.close()
            raise Released(f"{store.path} is in use")
        assert trusted.span is not None  # a standby's changelog failure is raised
        start, end = trusted.span
        return store, start, end

    def _tail(self, clients: _Clients, copy: WarmCopy) -> bool:
        """Read on a copy's changelog; whether more is there to read at once."""
        with copy.lock:
            if copy.releasing or copy.store is None:
                return False
            refused = copy.tail(clients.changelog, clients.identity)
            if refused is not None:
                self._refused(copy, refused)
                return False
            return copy.more

    def _refused(self, copy: WarmCopy, refused: Refused) -> None:
        """Drop a copy whose changelog cannot be used now (its active sees to the changelog)."""
        log.warning(
            "dropping the warm copy of %s[%d] (%s): %s; trying again in %.0fs",
            self._topic, copy.partition, refused.reason, refused.detail, _RETRY_S,
        )  # fmt: skip
        assert copy.store is not None  # called under the copy's lock, open
        destroy(copy.store, 1, self._memory_bytes).close()
        copy.store = None
        self._retry_at[copy.partition] = time.monotonic() + _RETRY_S
        self._forget(copy)

    def _forget(self, copy: WarmCopy) -> None:
        with self._lock:
            if self._copies.get(copy.partition) is copy:
                del self._copies[copy.partition]

    @staticmethod
    def _close(copy: WarmCopy) -> None:
        copy.releasing = True
        with copy.lock:
            if copy.store is not None:
                copy.store.close()
                copy.store = None
