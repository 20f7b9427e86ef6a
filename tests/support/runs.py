"""Benchmark runs through a model client into a result store, with write retries kept short."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from resultlog.kafka import KafkaConnection
from resultlog.producer import (
    Benchmark,
    KafkaResultStore,
    ModelClient,
    Progress,
    ResultStore,
    RunResult,
    model_solver,
    run_benchmark,
)
from resultlog.producer.runner import RunOptions, WritePolicy
from resultlog.settings import Settings

MODEL = "offline/gpt-4o"
FAST_WRITES = WritePolicy(initial_delay_s=0.01, rng=random.Random(7))


async def run_with(
    bench: Benchmark,
    client: ModelClient,
    store: ResultStore,
    run_id: str,
    *,
    model: str = MODEL,
    epochs: int = 1,
    sample_range: tuple[int, int] | None = None,
    max_concurrency: int = 8,
    degrade_solver_errors: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    write_policy: WritePolicy = FAST_WRITES,
    draining: asyncio.Event | None = None,
) -> RunResult:
    """A run (or resume) of `bench` as `model` through `client` into `store`."""
    return await run_benchmark(
        bench,
        model,
        run_id=run_id,
        solver=model_solver(client, model),
        store=store,
        options=RunOptions(
            epochs=epochs,
            max_concurrency=max_concurrency,
            sample_range=sample_range,
            degrade_solver_errors=degrade_solver_errors,
            write_policy=write_policy,
        ),
        on_progress=on_progress,
        draining=draining,
    )


async def run_once(
    settings: Settings,
    bench: Benchmark,
    run_id: str,
    base_url: str,
    *,
    epochs: int = 2,
    delivery_timeout_ms: int = 1500,
    concurrency: int = 2,
    on_progress: Callable[[Progress], None] | None = None,
    timeout_s: float = 10.0,
    max_retries: int = 0,
) -> RunResult:
    """One run (or resume) of `bench` against the model at `base_url` into a new Kafka store."""
    timeout = {"delivery_timeout_ms": delivery_timeout_ms}
    store = KafkaResultStore(KafkaConnection(settings.model_copy(update=timeout)))
    try:
        async with ModelClient(
            base_url, max_retries=max_retries, backoff_initial=0.01, timeout=timeout_s
        ) as client:
            return await run_with(
                bench,
                client,
                store,
                run_id,
                epochs=epochs,
                max_concurrency=concurrency,
                on_progress=on_progress,
                write_policy=WritePolicy(initial_delay_s=0.05, rng=random.Random(3)),
            )
    finally:
        await store.close()
