"""Leases as another process or machine would have written them, for the lease tests."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from resultlog.producer import Lease
from resultlog.schemas import RunKey, partition_for, run_key_prefix
from resultlog.settings import Settings


def foreign_lease(
    ttl_s: float, *, start: int = 0, end: int = 100, process: str | None = None, pid: int = 4242
) -> Lease:
    """A live lease of host `worker-7` on samples [start, end), expiring in `ttl_s`."""
    now = int(time.time() * 1000)
    return Lease(
        host="worker-7",
        pid=pid,
        token="f" * 16,
        process=process,
        start=start,
        end=end,
        since_ms=now,
        expires_ms=now + int(ttl_s * 1000),
    )


def write_lease(settings: Settings, run_key: RunKey, lease: Lease) -> Lease:
    """Produce the lease to the run key's partition of the leases topic, as its holder would."""
    producer = Producer(settings.client_config())
    producer.produce(
        settings.leases_topic,
        key=run_key_prefix(run_key) + lease.token.encode(),
        value=lease.model_dump_json().encode(),
        partition=partition_for(run_key, settings.partitions),
    )
    assert producer.flush(10) == 0
    return lease
