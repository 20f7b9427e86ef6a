"""Purge: delete one run from the log by writing tombstones for all of its keys.

What "deleted" means to each reader, once `purge_run` returns:
- resume and `status` find no records of the run (a tombstone deletes its key);
- `replay` of the run reports an empty run (records 0) and `replay --all` omits it;
- the aggregator drops the run: `GET /runs/{run_id}/{benchmark}/{model}` answers 404, and it
  publishes a tombstone for the run's summary as well;
- the summaries topic holds a tombstone for the run key, so its last summary is gone;
- compaction later removes the records and, after `delete.retention.ms`, the tombstones;
- the run's entry in the run index is tombstoned too (best effort: a reader without an entry
  reads the whole partition, and an entry the aggregator writes again still holds);
- the run key's spend in the spend ledger is tombstoned, so a budget of a run under the same
  key starts from nothing (if that fails, a warning: the old spend then still counts, which
  stops a budget early but never lets it pay more).

Every key of the run key's partition that starts with the run key's prefix and still has a
value gets a tombstone, whatever that value is: an undecodable latest value, or a key with the
run's prefix that does not parse, is part of the run and is deleted with it (the tombstone of
such a key is itself a bad key to `replay --all` and the aggregator's dead-letter topic until
compaction removes it). The summary tombstone is written even when no record was found, so an
interrupted purge completes when run again.

A writer holding a lease on the run key (a live `run`, a chunk worker) makes purge refuse,
naming it. `force` takes the lease over: the writer sees the fence at its next renewal, stops
writing and releases its lease; purge waits for that (or for the lease to expire), then holds
a lease on the whole run key itself while it writes the tombstones, so no writer starts
meanwhile.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from resultlog.consumers import ConsumerError

# The resume reader's partition scan is exactly what purge needs: the same keys resume sees.
from resultlog.consumers.resume import latest_run_values
from resultlog.kafka import KafkaClientError, KafkaConnection, produce
from resultlog.producer.errors import ProducerError
from resultlog.producer.lease import (
    Lease,
    LeaseError,
    LeaseHeldError,
    claim_lease,
    fence_lease,
    live_leases,
)
from resultlog.producer.spend import SpendLedgerError, open_ledger
from resultlog.schemas import RunKey, encode_run_key, partition_for, run_key_prefix

__all__ = [
    "PurgeError",
    "PurgeLeasedError",
    "PurgePlan",
    "execute_purge",
    "plan_purge",
    "purge_run",
]

log = logging.getLogger(__name__)

_ALL_SAMPLES = 2**31  # purge leases every sample index a record can have
_WAIT_S = 0.2


class PurgeError(ProducerError):
    """A purge could not read the run's keys or have its tombstones acknowledged."""


class PurgeLeasedError(PurgeError):
    """A live writer holds a lease on the run key: purging now would race it."""

    def __init__(self, run_key: RunKey, holder: Lease) -> None:
        since = datetime.fromtimestamp(holder.since_ms / 1000, UTC).strftime("%H:%M:%S UTC")
        super().__init__(
            f"{run_key} is being written: samples {holder.start}:{holder.end} leased by host "
            f"{holder.host} pid {holder.pid} since {since}; stop it first, or purge --force "
            f"to take its lease over (it stops writing)"
        )
        self.holder = holder


@dataclass(frozen=True)
class PurgePlan:
    """What a purge of one run key deletes, and who holds a lease on it now."""

    run_key: RunKey
    partition: int
    keys: tuple[bytes, ...]
    holders: tuple[Lease, ...]

    @property
    def records(self) -> int:
        """How many records (live keys) the purge deletes."""
        return len(self.keys)


def plan_purge(kafka: KafkaConnection, run_key: RunKey, *, timeout_s: float = 30.0) -> PurgePlan:
    """Count what a purge of the run key would delete; delete nothing."""
    partition, live = _live_keys(kafka, run_key, timeout_s)
    try:
        holders = live_leases(kafka, run_key)
    except LeaseError as exc:  # an unknown holder must not be purged under
        raise PurgeError(f"cannot read the leases of {run_key}: {exc}") from exc
    return PurgePlan(run_key, partition, tuple(live), tuple(holders))


def purge_run(
    kafka: KafkaConnection, run_key: RunKey, *, force: bool = False, timeout_s: float = 30.0
) -> int:
    """Tombstone every live key of the run and its summary; return how many records it deleted.

    Refuses (PurgeLeasedError) while a writer holds a lease on the run key, unless `force`.
    """
    return execute_purge(kafka, plan_purge(kafka, run_key, timeout_s=timeout_s), force=force)


def execute_purge(
    kafka: KafkaConnection, plan: PurgePlan, *, force: bool = False, timeout_s: float = 30.0
) -> int:
    """Purge what `plan` found (read again under purge's own lease); how many records went."""
    run_key = plan.run_key
    if plan.holders and not force:
        raise PurgeLeasedError(run_key, plan.holders[0])
    if plan.holders:
        _take_over(kafka, run_key, plan.holders)
    try:
        lease = claim_lease(kafka, run_key, (0, _ALL_SAMPLES))
    except LeaseHeldError as exc:  # a writer started since the plan was made
        raise PurgeLeasedError(run_key, exc.holder) from exc
    except LeaseError as exc:
        raise PurgeError(f"cannot lease {run_key} to purge it: {exc}") from exc
    with lease:
        return _purge_keys(kafka, run_key, timeout_s)


def _take_over(kafka: KafkaConnection, run_key: RunKey, holders: Sequence[Lease]) -> None:
    """Fence every holder, then wait until each has released its lease or let it expire."""
    me = f"purge --force on host {socket.gethostname()} pid {os.getpid()}"
    try:
        for holder in holders:
            fence_lease(kafka, run_key, holder, me)
        tokens = {holder.token for holder in holders}
        # A holder sees the fence within a third of its time to live; one that never does
        # stops renewing only when it dies: then its lease expires.
        deadline = max(h.expires_ms for h in holders) / 1000 + kafka.settings.lease_ttl_s
        while any(lease.token in tokens for lease in live_leases(kafka, run_key)):
            if time.time() > deadline:
                raise PurgeError(f"{run_key}: its writer did not give its lease up; not purged")
            time.sleep(_WAIT_S)
    except LeaseError as exc:
        raise PurgeError(f"cannot take the lease on {run_key} over: {exc}") from exc
    log.info("took the lease on %s over", run_key)


def _purge_keys(kafka: KafkaConnection, run_key: RunKey, timeout_s: float) -> int:
    """Tombstone every live key of the run and its summary; return how many records it deleted."""
    partition, live = _live_keys(kafka, run_key, timeout_s)
    log.info("purging %d record(s) of %s", len(live), run_key)
    producer = kafka.durable_producer()
    failures: list[str] = []
    try:
        _tombstones(producer, kafka.results_topic, partition, live, failures)
        count = kafka.partition_count(kafka.summaries_topic, producer, timeout_s=timeout_s)
        summary_key = [encode_run_key(run_key)]
        summaries = partition_for(run_key, count)
        _tombstones(producer, kafka.summaries_topic, summaries, summary_key, failures)
        if producer.flush(timeout_s) > 0:
            failures.append(f"not acknowledged within {timeout_s:.0f}s")
    except KafkaClientError as exc:
        raise PurgeError(f"cannot purge {run_key}: {exc}") from exc
    if failures:
        raise PurgeError(f"purging {run_key} failed: {failures[0]}")
    _forget_index_entry(kafka, producer, run_key, partition, timeout_s)
    _forget_spend(kafka, run_key)
    return len(live)


def _forget_spend(kafka: KafkaConnection, run_key: RunKey) -> None:
    """Tombstone the run key's pairs in the spend ledger (a warning if not)."""
    try:
        with open_ledger(kafka, run_key, "purge") as ledger:
            forgotten = ledger.forget()
    except SpendLedgerError as exc:
        log.warning("the spend of %s stays in the spend ledger: %s", run_key, exc)
        return
    log.info("deleted the spend of %d pair(s) of %s", forgotten, run_key)


def _forget_index_entry(
    kafka: KafkaConnection, producer: Producer, run_key: RunKey, partition: int, timeout_s: float
) -> None:
    """Tombstone the run's index entry, after its records' tombstones (a warning if not)."""
    topic = kafka.index_topic
    reader = kafka.reader()
    try:  # asked through a consumer: a producer's metadata request may auto-create a topic
        found = reader.list_topics(topic, timeout=timeout_s).topics.get(topic)
    except KafkaException as exc:
        found = None
        log.debug("no metadata of %s: %s", topic, exc)
    finally:
        reader.close()
    if found is None or found.error is not None or partition >= len(found.partitions):
        return
    failures: list[str] = []
    try:
        _tombstones(producer, topic, partition, [run_key_prefix(run_key)], failures)
        if producer.flush(timeout_s) > 0:
            failures.append(f"not acknowledged within {timeout_s:.0f}s")
    except KafkaClientError as exc:
        failures.append(str(exc))
    if failures:
        log.warning("the run index entry of %s stays (harmless): %s", run_key, failures[0])


def _live_keys(
    kafka: KafkaConnection, run_key: RunKey, timeout_s: float
) -> tuple[int, dict[bytes, tuple[int, bytes]]]:
    """The run key's partition and its keys whose latest value is not a tombstone."""
    try:
        partition, live = latest_run_values(kafka, run_key, timeout_s=timeout_s)
    except (ConsumerError, KafkaClientError) as exc:
        raise PurgeError(str(exc)) from exc
    return partition, live


def _tombstones(
    producer: Producer, topic: str, partition: int, keys: Iterable[bytes], failures: list[str]
) -> None:
    """Queue a null value for each key; delivery errors are collected into `failures`."""

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error.str())

    for key in keys:
        produce(producer, topic, key, None, partition=partition, on_delivery=on_delivery)
