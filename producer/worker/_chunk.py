"""Running chunks on an event loop of their own, so the consumer's thread keeps polling."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from typing import TYPE_CHECKING

from resultlog.consumers import LoadedViews, read_run_views
from resultlog.kafka import KafkaConnection
from resultlog.producer._config import run_config
from resultlog.producer._shared_budget import shared_budget
from resultlog.producer.lease import claim_lease
from resultlog.producer.model_client import ModelClient
from resultlog.producer.runner import RunBudget, RunOptions, RunResult, config_solver, run_benchmark
from resultlog.producer.store import KafkaResultStore
from resultlog.producer.worker._plan import task_benchmark
from resultlog.schemas import ChunkTask, RunKey, SampleResult

if TYPE_CHECKING:
    from resultlog.producer.offline import ModelServer

__all__ = ["ChunkRunner", "RunningChunk"]

log = logging.getLogger(__name__)

_CLOSE_S = 60.0


class RunningChunk:
    """One attempt at a chunk: wait for it, read its outcome, or cancel it from another thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._task: asyncio.Task[RunResult] | None = None
        self.draining = asyncio.Event()  # set on the loop: the run starts no more pairs
        self._settled = threading.Event()
        self.result: RunResult | None = None
        self.error: BaseException | None = None
        self.cancelled = False

    def attach(self, task: asyncio.Task[RunResult]) -> None:
        """Follow the asyncio task (called on the loop)."""
        self._task = task
        task.add_done_callback(self._settle)

    def _settle(self, task: asyncio.Task[RunResult]) -> None:
        if task.cancelled():
            self.cancelled = True
        elif task.exception() is not None:
            self.error = task.exception()
        else:
            self.result = task.result()
        self._settled.set()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the attempt to end; True once it has."""
        return self._settled.wait(timeout_s)

    def cancel(self, timeout_s: float = 10.0) -> bool:
        """Cancel the attempt and wait until it has unwound; True if it did in time."""
        # Scheduled after attach() (the loop runs callbacks in order), so the task exists.
        self._loop.call_soon_threadsafe(self._cancel_task)
        return self.wait(timeout_s)

    def drain(self, timeout_s: float = 10.0) -> bool:
        """Let the pairs in flight finish and be written, start none, and wait for the attempt
        to end; cancel it if it has not within `timeout_s`. True if it ended in time."""
        self._loop.call_soon_threadsafe(self.draining.set)
        return self.wait(timeout_s) or self.cancel(timeout_s)

    def _cancel_task(self) -> None:
        if self._task is not None:
            self._task.cancel()


class _ChunkStore:
    """The worker's result store as one chunk sees it: resume decodes only the chunk's keys.

    The runner's summary over what it loads is then the chunk's, which the worker never
    reports; the run's summary is the aggregator's and replay's.
    """

    def __init__(self, kafka: KafkaConnection, store: KafkaResultStore, task: ChunkTask) -> None:
        self._kafka = kafka
        self._store = store
        self._samples = range(task.start, task.end)

    async def write(self, record: SampleResult) -> None:
        """Write through the worker's store."""
        await self._store.write(record)

    async def load(self, run_key: RunKey) -> LoadedViews:
        """The fold views of the latest records of the chunk's samples."""
        return await asyncio.to_thread(read_run_views, self._kafka, run_key, samples=self._samples)

    async def close(self) -> None:
        """Nothing of its own: the worker closes its store."""


class ChunkRunner:
    """Runs chunk tasks with the runner, writing through one result store."""

    def __init__(self, kafka: KafkaConnection, *, concurrency: int) -> None:
        self._kafka = kafka
        self._settings = kafka.settings
        self._concurrency = concurrency
        self._store = KafkaResultStore(kafka)
        self._clients: dict[str, ModelClient] = {}  # per endpoint, kept across chunks
        self._offline: ModelServer | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="resultlog-chunks", daemon=True
        )
        self._thread.start()

    def start(self, task: ChunkTask) -> RunningChunk:
        """Start one attempt at the chunk; it runs on the runner's loop."""
        running = RunningChunk(self._loop)

        def create() -> None:
            running.attach(self._loop.create_task(self._run(task, running.draining)))

        self._loop.call_soon_threadsafe(create)
        return running

    async def _run(self, task: ChunkTask, draining: asyncio.Event) -> RunResult:
        benchmark = task_benchmark(task)
        client = self._client(task.base_url or self._offline_url())
        config = run_config(
            benchmark,
            task.model,
            base_url=task.base_url,
            temperature=task.temperature,
            max_tokens=task.max_tokens,
        )
        return await run_benchmark(
            benchmark,
            task.model,
            run_id=task.run_id,
            solver=config_solver(client, config),
            store=_ChunkStore(self._kafka, self._store, task),
            options=RunOptions(
                epochs=task.epochs,
                max_concurrency=self._concurrency,
                sample_range=task.sample_range,
                degrade_solver_errors=task.degrade_solver_errors,
                chunk_id=task.chunk_id,
                chunk_index=task.chunk_index,
                config=config,
            ),
            # One budget for the run key, whatever its chunks, workers and submissions: the
            # spend ledger on Kafka, not a share per chunk.
            budget=None
            if task.budget_usd is None
            else RunBudget(
                task.budget_usd,
                shared=shared_budget(self._kafka, max_pair_usd=task.max_pair_usd),
            ),
            # Like `run`: no other writer of these samples (a `run`, an overlapping chunk of
            # another submit, a stalled owner of this chunk) pays for them beside us.
            lease=functools.partial(claim_lease, self._kafka),
            draining=draining,
        )

    def _client(self, base_url: str) -> ModelClient:
        """The model client of an endpoint (made once: it holds a connection pool)."""
        if base_url not in self._clients:
            settings = self._settings
            # The API key is the worker's own (its environment), never the task's.
            self._clients[base_url] = ModelClient(
                base_url,
                settings.api_key,
                timeout=settings.model_timeout_s,
                max_retries=settings.model_max_retries,
                backoff_initial=settings.model_retry_backoff_s,
            )
        return self._clients[base_url]

    def _offline_url(self) -> str:
        """A task without a base URL uses this worker's embedded offline model (as `run` does)."""
        if self._offline is None:
            from resultlog.producer.offline import ModelServer

            self._offline = ModelServer().start()
        return self._offline.base_url

    def close(self) -> None:
        """Make every finished write durable, then stop the loop (and the offline model)."""
        try:
            closed = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
            closed.result(_CLOSE_S)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(_CLOSE_S)
            with contextlib.suppress(RuntimeError):  # a loop still running cannot be closed
                self._loop.close()
            if self._offline is not None:
                self._offline.stop()

    async def _close(self) -> None:
        for client in self._clients.values():
            await client.aclose()
        await self._store.close()
