"""A rescore's source is a finished run: refused while its writer holds its lease, or waited
for; the rescored run's configuration names the source and the offsets it covered (real
broker)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest

from resultlog.consumers import RunRecords
from resultlog.kafka import KafkaConnection
from resultlog.producer import claim_lease
from resultlog.producer.rescore import SourceBusyError, read_finished, rescore_run, resolve_scorer
from resultlog.producer.store import KafkaResultStore
from resultlog.schemas import Message, RunKey
from resultlog.settings import Settings
from tests.support.kafka import raw_run_records, stored_records
from tests.support.records import make_record
from tests.support.runs import FAST_WRITES, MODEL

SOURCE = RunKey("src", "arith", MODEL)
PAIRS = 8
_ANSWERED = (
    Message(role="user", content="What is 1 + 1?"),
    Message(role="assistant", content="2"),
)


async def _write(store: KafkaResultStore, indexes: range) -> None:
    for index in indexes:
        await store.write(
            make_record(
                index, 0, "C", run_key=SOURCE, epochs=1, dataset_size=PAIRS, messages=_ANSWERED
            )
        )


async def test_a_source_still_leased_is_refused_naming_its_writer(
    kafka: KafkaConnection, kafka_store: KafkaResultStore
) -> None:
    await _write(kafka_store, range(PAIRS // 2))
    writer = f"host {socket.gethostname()} pid {os.getpid()}"
    with claim_lease(kafka, SOURCE, (0, PAIRS)), pytest.raises(SourceBusyError) as refused:
        read_finished(kafka, SOURCE)
    assert f"run {SOURCE} is still being written (samples 0:{PAIRS} leased by {writer}" in str(
        refused.value
    )
    assert "\n" not in str(refused.value)


async def test_waiting_covers_the_whole_run_and_the_config_names_its_offsets(
    settings: Settings, kafka: KafkaConnection, kafka_store: KafkaResultStore
) -> None:
    lease = claim_lease(kafka, SOURCE, (0, PAIRS))
    await _write(kafka_store, range(PAIRS // 2))
    waited: list[str] = []
    read: list[RunRecords] = []
    reader = threading.Thread(
        target=lambda: read.append(read_finished(kafka, SOURCE, wait=True, on_wait=waited.append))
    )
    reader.start()
    time.sleep(1.0)
    assert reader.is_alive() and not read  # waits while the writer holds its lease
    await _write(kafka_store, range(PAIRS // 2, PAIRS))
    lease.release()
    reader.join(30)
    [loaded] = read
    assert len(waited) == 1 and "waiting for it to finish" in waited[0]
    assert sorted(r.sample_index for r in loaded.records) == list(range(PAIRS))

    result = await rescore_run(
        loaded,
        "src-numeric",
        resolve_scorer("numeric"),
        store=kafka_store,
        write_policy=FAST_WRITES,
    )
    [config] = {r.config for r in stored_records(settings, result.summary.run_key)}
    source = json.loads(config or "")["rescored_from"]
    offsets = [r.offset for r in raw_run_records(settings, SOURCE)]
    partition = raw_run_records(settings, SOURCE)[0].partition
    assert source["run_id"] == SOURCE.run_id and source["records"] == PAIRS
    assert source["offsets"] == {"partition": partition, "first": offsets[0], "last": offsets[-1]}
