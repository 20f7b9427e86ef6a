"""A run whose broker goes away mid-run fails with a persistence error, never a success."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from resultlog.broker import LocalKafka
from resultlog.consumers import read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.producer import PersistenceError, Progress
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.offline import ModelServer
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.runs import MODEL, run_once

pytestmark = pytest.mark.faults

SAMPLES = 40


async def test_broker_stopped_mid_run_fails_the_run_and_a_rerun_completes_it(
    restartable_kafka: LocalKafka, restartable_settings: Settings
) -> None:
    bench = limit_samples(arith(), SAMPLES)
    stopper: list[threading.Thread] = []

    def stop_broker_part_way(progress: Progress) -> None:
        if progress.done >= 8 and not stopper:
            stopper.append(threading.Thread(target=restartable_kafka.stop_node, args=(1,)))
            stopper[0].start()

    # Slow enough that most pairs are still to come when the broker goes away.
    with ModelServer(latency_s=0.15) as server:
        with pytest.raises(PersistenceError, match="after 4 attempt"):
            await run_once(
                restartable_settings,
                bench,
                "broker-loss",
                server.base_url,
                epochs=1,
                on_progress=stop_broker_part_way,
            )
        stopper[0].join()

        restartable_kafka.start_node(1)
        result = await run_once(
            restartable_settings, bench, "broker-loss", server.base_url, epochs=1
        )
    with KafkaConnection(restartable_settings) as kafka:
        records = read_run_records(kafka, RunKey("broker-loss", "arith", MODEL)).records
    assert Counter(r.sample_index for r in records) == dict.fromkeys(range(SAMPLES), 1)
    assert result.summary.records == SAMPLES
