"""A run whose broker goes away mid-run fails with a persistence error, never a success."""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path

import pytest

from resultlog.broker import LocalKafka
from resultlog.consumers import read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.producer import (
    KafkaResultStore,
    ModelClient,
    PersistenceError,
    Progress,
    model_solver,
    run_benchmark,
)
from resultlog.producer.benchmarks import StaticBenchmark, arith
from resultlog.producer.offline import ModelServer
from resultlog.producer.runner import WritePolicy
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from resultlog.topics import ensure_topics

MODEL = "offline/m"
SAMPLES = 40


async def test_broker_stopped_mid_run_fails_the_run_and_a_rerun_completes_it(
    kafka_dir: Path,
) -> None:
    kafka = LocalKafka(kafka_dir)
    settings = Settings(bootstrap_servers=kafka.up(port=0), partitions=2, delivery_timeout_ms=1500)
    ensure_topics(KafkaConnection(settings))
    full = arith()
    bench = StaticBenchmark("arith", full.items[:SAMPLES], full.scorer)
    stopper: list[threading.Thread] = []

    def stop_broker_part_way(progress: Progress) -> None:
        if progress.done >= 8 and not stopper:
            stopper.append(threading.Thread(target=kafka.stop_node, args=(1,)))
            stopper[0].start()

    async def run(on_progress: object = None) -> object:
        store = KafkaResultStore(KafkaConnection(settings))
        try:
            # Slow enough that most pairs are still to come when the broker goes away.
            with ModelServer(latency_s=0.15) as server:
                async with ModelClient(server.base_url, max_retries=0) as client:
                    return await run_benchmark(
                        bench,
                        MODEL,
                        run_id="broker-loss",
                        solver=model_solver(client, MODEL),
                        store=store,
                        max_concurrency=2,
                        on_progress=on_progress,  # type: ignore[arg-type]
                        write_policy=WritePolicy(initial_delay_s=0.05, rng=random.Random(1)),
                    )
        finally:
            await store.close()

    with pytest.raises(PersistenceError, match="after 4 attempt"):
        await run(stop_broker_part_way)
    stopper[0].join()

    kafka.start_node(1)
    result = await run()
    records = read_run_records(
        KafkaConnection(settings), RunKey("broker-loss", "arith", MODEL)
    ).records
    assert Counter(r.sample_index for r in records) == dict.fromkeys(range(SAMPLES), 1)
    assert result.summary.records == SAMPLES  # type: ignore[attr-defined]
