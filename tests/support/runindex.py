"""The run index as tests see it: its records, what a reader of one run reads, a full scan."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from resultlog.consumers._index_codec import MARKER_KEY, IndexRecord, decode
from resultlog.consumers._run_read import read_run
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, SampleResult, encode_key, partition_for, run_key_prefix
from resultlog.settings import Settings
from tests.support.kafka import produce_raw, read_partition, run_partition
from tests.support.waiting import wait_for

SCAN_LOG = "reading all of"  # what a reader says at INFO when it cannot use the index

Latest = dict[bytes, tuple[int, bytes]]


@dataclass(frozen=True)
class RunReadOut:
    """What one reader of a run read: guided or not, the offsets it was given, the latest
    value of each live key of the run."""

    guided: bool
    offsets: list[int]
    latest: Latest


def read_one_run(settings: Settings, run_key: RunKey) -> RunReadOut:
    """Read a run the way every one-run reader does (`read_run`), keeping what it saw."""
    prefix = run_key_prefix(run_key)
    offsets: list[int] = []
    latest: Latest = {}
    with KafkaConnection(settings) as kafka, read_run(kafka, run_key, 30.0) as found:
        for message in found.messages:
            offset = message.offset() or 0
            offsets.append(offset)
            key, value = message.key(), message.value()
            if key is None or not key.startswith(prefix):
                continue
            if value is None:
                latest.pop(key, None)
            else:
                latest[key] = (offset, value)
        return RunReadOut(found.guided, offsets, latest)


def put(settings: Settings, records: list[SampleResult]) -> None:
    """Produce records verbatim (fast: no result store), each to its run key's partition."""
    with KafkaConnection(settings) as kafka:
        encode = kafka.codec.encode_sample_result
        messages = [
            (
                encode_key(r.run_key, r.sample_index, r.epoch),
                encode(r),
                partition_for(r.run_key, settings.partitions),
            )
            for r in records
        ]
    assert produce_raw(settings, messages) == []


def full_scan(settings: Settings, run_key: RunKey) -> Latest:
    """The latest value of each live key of the run, from its whole partition."""
    prefix = run_key_prefix(run_key)
    latest: Latest = {}
    partition = run_partition(settings, run_key)
    for record in read_partition(settings, settings.results_topic, partition):
        if record.key is None or not record.key.startswith(prefix):
            continue
        if record.value is None:
            latest.pop(record.key, None)
        else:
            latest[record.key] = (record.offset, record.value)
    return latest


def index_records(settings: Settings, partition: int) -> dict[bytes, IndexRecord | None]:
    """The latest decoded index record per key of one index partition (None: a tombstone)."""
    found: dict[bytes, IndexRecord | None] = {}
    for record in read_partition(settings, settings.index_topic, partition):
        if record.key is not None:
            found[record.key] = None if record.value is None else decode(record.value)
    return found


def indexed_through(settings: Settings, partition: int) -> int:
    """The partition's "indexed through" offset (-1 without one)."""
    marker = index_records(settings, partition).get(MARKER_KEY)
    return -1 if marker is None or marker.through is None else marker.through


def wait_indexed(settings: Settings, run_key: RunKey, through: int) -> None:
    """Wait until the run's partition is indexed through at least `through`."""
    partition = run_partition(settings, run_key)
    wait_for(
        lambda: indexed_through(settings, partition) >= through,
        f"the run index of partition {partition} through {through}",
    )


def scans_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The INFO lines of readers that read a whole partition."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.INFO and r.getMessage().startswith(SCAN_LOG)
    ]
