"""A rescore's source: a run's latest records, read only once no writer holds its lease."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from resultlog.consumers import RunRecords, read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.producer.lease import Lease, live_leases
from resultlog.producer.rescore._errors import RescoreError
from resultlog.schemas import RunKey

__all__ = ["SourceBusyError", "read_finished"]

_POLL_S = 0.5


class SourceBusyError(RescoreError):
    """The source run is still being written: a lease on it is held."""


def read_finished(
    kafka: KafkaConnection,
    source: RunKey,
    *,
    wait: bool = False,
    on_wait: Callable[[str], None] | None = None,
) -> RunRecords:
    """The source's latest records once no writer leases it: refused while one does, or,
    with `wait`, read after it finished (a writer that starts during the read is seen too)."""
    while True:
        _until_unleased(kafka, source, wait, on_wait)
        loaded = read_run_records(kafka, source)
        if not live_leases(kafka, source):
            return loaded


def _until_unleased(
    kafka: KafkaConnection, source: RunKey, wait: bool, on_wait: Callable[[str], None] | None
) -> None:
    told = False
    while leases := live_leases(kafka, source):
        busy = f"run {source} is still being written ({_writer(leases[0])})"
        if not wait:
            raise SourceBusyError(
                f"{busy}: rescore a finished run, or give --wait to wait for it to finish"
            )
        if not told and on_wait is not None:
            on_wait(f"{busy}: waiting for it to finish")
            told = True
        time.sleep(_POLL_S)


def _writer(lease: Lease) -> str:
    since = datetime.fromtimestamp(lease.since_ms / 1000, UTC).strftime("%H:%M:%S UTC")
    return (
        f"samples {lease.start}:{lease.end} leased by host {lease.host} pid {lease.pid} "
        f"since {since}"
    )
