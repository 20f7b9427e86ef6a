"""Leases on run keys, kept on Kafka: one live holder per overlapping sample range.

A lease is a message on the compacted leases topic, keyed `run key/token` in the run key's
partition (the results topic's partitioner), with a JSON value: the holder (host, pid, a
random token), the half-open sample range it covers and when it expires. Its holder renews it
every third of its time to live and deletes it (a tombstone) when done.

Claiming writes the claim, then reads the partition back: among the live leases whose ranges
overlap, the one claimed first in the partition's log order wins, so of simultaneous
claimants exactly one goes on and the others withdraw their claim. Renewals carry the offset
of their claim, so compaction never changes who was first. Leases on disjoint ranges of one
run key (distributed chunk workers) never conflict.

A lease stops counting when it expires, or at once when its holder is known dead: on Linux a
holder records its boot id, pid namespace and process start time, so a claimant on the same
machine sees that a crashed holder's pid is gone (or reused) and need not wait for the expiry.
Expiry compares wall clocks: hosts whose clocks differ by a good part of the time to live
may see a lease expire early or late.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import socket
import threading
import time
from datetime import UTC, datetime
from typing import NamedTuple, Self

from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition
from pydantic import BaseModel, ConfigDict, ValidationError

from resultlog.consumers import ConsumerError
from resultlog.consumers._scan import TRANSIENT, scan, scan_ranges, watermark_offsets
from resultlog.kafka import KafkaClientError, KafkaConnection, produce, produce_acked
from resultlog.producer.errors import ProducerError
from resultlog.schemas import RunKey, partition_for, run_key_prefix

__all__ = [
    "Lease",
    "LeaseError",
    "LeaseHeldError",
    "LeaseLostError",
    "RunLease",
    "claim_lease",
    "fence_lease",
    "live_leases",
]

log = logging.getLogger(__name__)

_TIMEOUT_S = 15.0
_RENEWALS_PER_TTL = 3


class LeaseError(ProducerError):
    """A lease could not be read, claimed or kept."""


class LeaseHeldError(LeaseError):
    """Another live holder leases an overlapping range of the run key."""

    def __init__(self, run_key: RunKey, span: tuple[int, int], holder: Lease) -> None:
        since = datetime.fromtimestamp(holder.since_ms / 1000, UTC).strftime("%H:%M:%S UTC")
        expires_in = max(0.0, holder.expires_ms / 1000 - time.time())
        super().__init__(
            f"{run_key} samples {span[0]}:{span[1]} overlap samples {holder.start}:{holder.end} "
            f"leased by host {holder.host} pid {holder.pid} since {since} "
            f"(expires in {expires_in:.0f}s unless renewed); wait for it to finish or expire"
        )
        self.holder = holder


class LeaseLostError(LeaseError):
    """This process's lease expired before it could renew it (a stall, Kafka unreachable):
    another writer may hold the range now, so this one must start nothing more."""


class Lease(BaseModel):
    """One lease as the leases topic holds it."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    host: str
    pid: int
    token: str
    # boot id / pid namespace / process start time: who the holder is on its machine (Linux).
    process: str | None = None
    start: int
    end: int
    since_ms: int
    expires_ms: int
    # The offset of the claim that made this lease: log order between claimants.
    claim_offset: int | None = None

    def overlaps(self, start: int, end: int) -> bool:
        """True when the lease's range and [start, end) share a sample."""
        return self.start < end and start < self.end

    def live(self, now_ms: int) -> bool:
        """Not expired, and not held by a process known to be dead."""
        return self.expires_ms > now_ms and not _process_gone(self.process, self.pid)


class RunLease:
    """A lease this process holds on a run key's sample range, renewed until released."""

    def __init__(
        self, kafka: KafkaConnection, run_key: RunKey, span: tuple[int, int], ttl_s: float
    ) -> None:
        self.run_key = run_key
        self.span = span
        self.ttl_s = ttl_s
        self._kafka = kafka
        self._topic = kafka.settings.leases_topic
        # Not idempotent: a new idempotent producer may wait 0.5 s for its producer id (when
        # librdkafka asks while swapping the bootstrap connection for the broker's own, it
        # retries on a 500 ms timer), and every lease write is one message, acknowledged
        # before the next: a retried duplicate carries the same value, so nothing changes.
        self._producer = kafka.durable_producer({"enable.idempotence": False})
        try:
            count = kafka.partition_count(self._topic, self._producer, timeout_s=_TIMEOUT_S)
        except KafkaClientError as exc:
            raise LeaseError(f"cannot lease {run_key}: {exc}") from exc
        self._partition = partition_for(run_key, count)
        token = secrets.token_hex(8)
        self._key = run_key_prefix(run_key) + token.encode("ascii")
        now = _now_ms()
        self.lease = Lease(
            host=socket.gethostname(),
            pid=os.getpid(),
            token=token,
            process=_process_identity(os.getpid()),
            start=span[0],
            end=span[1],
            since_ms=now,
            expires_ms=now + int(ttl_s * 1000),
        )
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        # Set when another process took the lease over (a forced purge): stop writing.
        self.lost = threading.Event()
        self.fenced_by = ""
        self._lost = False

    def claim(self) -> None:
        """Claim the range, or raise LeaseHeldError naming the holder that came first."""
        before = self._read()
        self._refuse_if_held(before.leases)
        offset = self._write(self.lease.model_dump_json().encode())
        try:
            # Only what came since: the leases read above, updated by the claims, renewals
            # and releases written up to ours.
            leases = self._read(since=before).leases
            self._refuse_if_held(leases, before=offset)
        except LeaseError:
            self._withdraw()
            raise
        self.lease = self.lease.model_copy(update={"claim_offset": offset})
        self._sweep(leases)
        self._renewer = threading.Thread(target=self._renew_loop, name="resultlog-lease")
        self._renewer.daemon = True
        self._renewer.start()

    def check(self) -> None:
        """Raise LeaseLostError unless the lease is still ours (renewed in time, by our clock)."""
        if self._lost or _now_ms() >= self.lease.expires_ms:
            self._lost = True
            raise LeaseLostError(
                f"the lease on {self.run_key} samples {self.span[0]}:{self.span[1]} expired "
                "before this process renewed it (stalled or cut off from Kafka); another "
                "writer may hold it now: starting no more pairs"
            )

    def renew(self) -> None:
        """Push the expiry one time-to-live ahead (never once it has passed: check())."""
        self.check()
        expires = _now_ms() + int(self.ttl_s * 1000)
        self.lease = self.lease.model_copy(update={"expires_ms": expires})
        self._write(self.lease.model_dump_json().encode())

    def release(self) -> None:
        """Stop renewing and delete the lease (if Kafka cannot be reached, it expires)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
            self._renewer = None
            self._withdraw()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def _refuse_if_held(
        self, leases: dict[bytes, tuple[int, Lease]], before: int | None = None
    ) -> None:
        now = _now_ms()
        start, end = self.span
        for key, (offset, other) in leases.items():
            if key == self._key or not other.overlaps(start, end) or not other.live(now):
                continue
            claimed = other.claim_offset if other.claim_offset is not None else offset
            if before is None or claimed < before:
                raise LeaseHeldError(self.run_key, self.span, other)

    def _sweep(self, leases: dict[bytes, tuple[int, Lease]]) -> None:
        """Delete the run key's dead leases (crashed holders), so compaction drops them."""
        now = _now_ms()
        for key, (_, other) in leases.items():
            if key != self._key and not other.live(now):
                with contextlib.suppress(LeaseError):  # hygiene only: they count for nothing
                    self._write(None, key)

    def _withdraw(self) -> None:
        try:
            self._write(None)
        except LeaseError as exc:
            log.warning(
                "could not delete the lease on %s (it expires by itself): %s", self.run_key, exc
            )

    def _renew_loop(self) -> None:
        fence = _fence_key(self.run_key, self.lease.token)
        while not self._stop.wait(self.ttl_s / _RENEWALS_PER_TTL):
            try:
                fenced = _latest_value(self._kafka, self._topic, self._partition, fence)
                if fenced is not None:  # taken over: stop renewing, the holder stops writing
                    self.fenced_by = fenced.decode("utf-8", "replace")
                    # Said by the holder's own error; the thread only informs.
                    log.info("the lease on %s was taken over by %s", self.run_key, self.fenced_by)
                    self.lost.set()
                    return
                self.renew()
            except LeaseLostError as exc:
                log.error("%s", exc)
                return
            except LeaseError as exc:  # keep trying: the next renewal may reach Kafka
                log.warning("could not renew the lease on %s: %s", self.run_key, exc)

    def _write(self, value: bytes | None, key: bytes | None = None) -> int:
        """Produce the lease (None: a tombstone), wait for the broker; return its offset."""
        timeout_s = self._kafka.settings.delivery_timeout_ms / 1000
        topic, partition = self._topic, self._partition
        try:
            return produce_acked(
                self._producer,
                topic,
                key or self._key,
                value,
                partition=partition,
                timeout_s=timeout_s,
            )
        except KafkaClientError as exc:
            raise LeaseError(f"cannot write the lease on {self.run_key}: {exc}") from exc

    def _read(self, since: _Leases | None = None) -> _Leases:
        return _read_leases(self._kafka, self._topic, self._partition, self.run_key, since)


def claim_lease(
    kafka: KafkaConnection, run_key: RunKey, span: tuple[int, int], *, ttl_s: float | None = None
) -> RunLease:
    """Lease samples [start, end) of the run key, renewed until `release()` (or `with` exits).

    Raises LeaseHeldError when a live lease on an overlapping range came first.
    """
    start, end = span
    if not 0 <= start < end:
        raise ValueError(f"a lease covers 0 <= start < end, got {start}:{end}")
    lease = RunLease(
        kafka, run_key, span, ttl_s if ttl_s is not None else kafka.settings.lease_ttl_s
    )
    lease.claim()
    return lease


def fence_lease(kafka: KafkaConnection, run_key: RunKey, holder: Lease, by: str) -> None:
    """Take a holder's lease over: at its next renewal it stops writing and releases it.

    `by` names who took it over (shown to the holder). The fence is a message of its own key,
    so the holder's renewals never overwrite it.
    """
    topic = kafka.settings.leases_topic
    producer = kafka.durable_producer()
    failed: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failed.append(error.str())

    try:
        count = kafka.partition_count(topic, producer, timeout_s=_TIMEOUT_S)
        key = _fence_key(run_key, holder.token)
        partition = partition_for(run_key, count)
        produce(producer, topic, key, by.encode(), partition=partition, on_delivery=delivered)
    except KafkaClientError as exc:
        raise LeaseError(f"cannot take the lease on {run_key} over: {exc}") from exc
    if producer.flush(kafka.settings.delivery_timeout_ms / 1000) > 0 or failed:
        reason = failed[0] if failed else "no acknowledgement in time"
        raise LeaseError(f"cannot take the lease on {run_key} over: {reason}")


def live_leases(kafka: KafkaConnection, run_key: RunKey) -> list[Lease]:
    """The live leases on the run key, first claimed first."""
    topic = kafka.settings.leases_topic
    try:
        count = kafka.partition_count(topic, timeout_s=_TIMEOUT_S)
    except KafkaClientError as exc:
        raise LeaseError(str(exc)) from exc
    leases = _read_leases(kafka, topic, partition_for(run_key, count), run_key).leases
    now = _now_ms()
    ordered = sorted(leases.values(), key=lambda item: item[1].claim_offset or item[0])
    return [lease for _, lease in ordered if lease.live(now)]


class _Leases(NamedTuple):
    """The latest lease (offset, value) of every key of a run key, read up to `end`."""

    leases: dict[bytes, tuple[int, Lease]]
    end: int


def _read_leases(
    kafka: KafkaConnection,
    topic: str,
    partition: int,
    run_key: RunKey,
    since: _Leases | None = None,
) -> _Leases:
    """The run key's leases in its partition: all of it, or `since` updated by what follows."""
    deadline = time.monotonic() + _TIMEOUT_S
    while True:
        try:
            return _read_once(kafka, topic, partition, run_key_prefix(run_key), since)
        except KafkaException as exc:
            error = exc.args[0]
            # A partition moving (a new topic, a leader election) is worth waiting out.
            transient = isinstance(error, KafkaError) and error.code() in TRANSIENT
            if not transient or time.monotonic() > deadline:
                raise LeaseError(f"cannot read the leases of {run_key}: {exc}") from exc
            time.sleep(0.1)
        except ConsumerError as exc:
            raise LeaseError(f"cannot read the leases of {run_key}: {exc}") from exc


def _read_once(
    kafka: KafkaConnection, topic: str, partition: int, prefix: bytes, since: _Leases | None
) -> _Leases:
    leases = {} if since is None else dict(since.leases)
    consumer = kafka.reader()
    try:
        low, high = watermark_offsets(consumer, TopicPartition(topic, partition), _TIMEOUT_S)
        start = low if since is None else max(low, since.end)
        for message in scan_ranges(consumer, topic, partition, [(start, high)], _TIMEOUT_S):
            key, value = message.key(), message.value()
            if key is None or not key.startswith(prefix):
                continue
            if value is None:
                leases.pop(key, None)
                continue
            with contextlib.suppress(ValidationError):  # not a lease of ours: not a holder
                leases[key] = (message.offset() or 0, Lease.model_validate_json(value))
    finally:
        consumer.close()
    return _Leases(leases, max(high, start))


def _fence_key(run_key: RunKey, token: str) -> bytes:
    """The key of the fence on a holder's lease (never a lease key: tokens are hex)."""
    return run_key_prefix(run_key) + b"fence/" + token.encode("ascii")


def _latest_value(kafka: KafkaConnection, topic: str, partition: int, key: bytes) -> bytes | None:
    """The latest value of one key of the partition (None: absent or a tombstone)."""
    consumer = kafka.reader()
    try:
        _, messages = scan(consumer, topic, [partition], _TIMEOUT_S)
        found = [message.value() for message in messages if message.key() == key]
    except (KafkaException, ConsumerError) as exc:
        raise LeaseError(f"cannot read the leases topic: {exc}") from exc
    finally:
        consumer.close()
    return found[-1] if found else None


def _now_ms() -> int:
    return int(time.time() * 1000)


def _process_identity(pid: int) -> str | None:
    """`boot id/pid namespace/start time` of a local process, or None off Linux."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot:
            boot_id = boot.read().strip()
        namespace = os.readlink("/proc/self/ns/pid")
        started = _start_time(pid)
    except OSError:
        return None
    return None if started is None else f"{boot_id}/{namespace}/{started}"


def _start_time(pid: int) -> str | None:
    """The start time of a live (not zombie) process, from /proc; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except FileNotFoundError:
        return None
    # After the command name: state is field 3 of stat(5), start time field 22.
    return None if fields[0] in ("Z", "X") else fields[19]


def _process_gone(process: str | None, pid: int) -> bool:
    """True when `process` names a process of this machine and pid namespace that has ended."""
    here = _process_identity(os.getpid())
    if process is None or here is None:
        return False
    boot_ns, _, started = process.rpartition("/")
    if boot_ns != here.rpartition("/")[0]:
        return False  # another machine or container: only the expiry tells
    with contextlib.suppress(OSError):
        return _start_time(pid) != started
    return False
