"""The benchmark runner: evaluate (sample, epoch) pairs, persist each, resume from the log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from resultlog.consumers import ResumeState, RunFold
from resultlog.producer._degraded import persist_degraded
from resultlog.producer._records import RunIdentity, completed_record, degraded_record
from resultlog.producer._retry import WritePolicy
from resultlog.producer.benchmarks import Benchmark, Sample
from resultlog.producer.context import SampleContext, sample_scope
from resultlog.producer.errors import BenchmarkError, ModelError, ProducerError, SolverError
from resultlog.producer.model_client import Completion, ModelClient, classify_model_error
from resultlog.producer.store import NoopResultStore, ResultStore
from resultlog.schemas import (
    ConfigurationError,
    ResultLogError,
    RunKey,
    RunSummary,
    SampleResult,
    ScoreValue,
)

__all__ = [
    "LeaseFactory",
    "Progress",
    "RunResult",
    "Solver",
    "WritePolicy",
    "model_solver",
    "run_benchmark",
]

log = logging.getLogger(__name__)

Solver = Callable[[Benchmark, Sample], Awaitable[Completion]]
# Claims the run key's samples [start, end) for the run's duration, or raises (a live holder).
LeaseFactory = Callable[[RunKey, tuple[int, int]], AbstractContextManager[object]]


@dataclass(frozen=True)
class Progress:
    """Where a run stands: pairs done now, skipped from the log, degraded, of the total."""

    total: int
    done: int
    skipped: int
    degraded: int


@dataclass(frozen=True)
class RunResult:
    """A finished run: the run key's summary and this run's per-(sample, epoch) records.

    `summary` is the run's, as replay computes it (every latest record of the run key, this
    run's writes on top); `records`, `skipped`, `evaluated` and `degraded` are this run's.
    """

    summary: RunSummary
    records: tuple[SampleResult, ...]
    skipped: int
    evaluated: int
    degraded: int


def model_solver(
    client: ModelClient,
    model: str,
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> Solver:
    """The default solver: one chat completion of the benchmark's messages.

    `temperature` and `max_tokens`, when given, are sent as request parameters.
    """
    given: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
    params = {name: value for name, value in given.items() if value is not None}

    async def solve(benchmark: Benchmark, sample: Sample) -> Completion:
        return await client.complete(benchmark.messages(sample), model=model, **params)

    return solve


async def run_benchmark(
    benchmark: Benchmark,
    model: str,
    *,
    run_id: str,
    solver: Solver,
    epochs: int = 1,
    store: ResultStore | None = None,
    max_concurrency: int = 8,
    sample_range: tuple[int, int] | None = None,
    degrade_solver_errors: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
    write_policy: WritePolicy | None = None,
    chunk_id: str | None = None,
    chunk_index: int | None = None,
    lease: LeaseFactory | None = None,
) -> RunResult:
    """Run every (sample, epoch) of the range not already durable; return the run's result.

    With `lease`, the run holds a lease on its samples of the run key from before it reads
    the log until it returns, so no other leased run of an overlapping range pays for them.
    """
    if epochs < 1 or max_concurrency < 1:
        raise ValueError("epochs and max_concurrency must be >= 1")
    dataset = benchmark.samples()
    samples = _select(dataset, sample_range, benchmark.name)
    run = RunIdentity(
        RunKey(run_id, benchmark.name, model),
        epochs,
        len(dataset),
        chunk_id,
        chunk_index,
    )
    execution = _Execution(
        benchmark,
        run,
        solver,
        store=store or NoopResultStore(),
        policy=write_policy or WritePolicy(),
        degrade_solver_errors=degrade_solver_errors,
        on_progress=on_progress,
    )
    async with _leased(lease, run.run_key, samples):
        resume = await execution.resume({s.index for s in samples})
        return await execution.run(samples, resume, max_concurrency)


@contextlib.asynccontextmanager
async def _leased(
    lease: LeaseFactory | None, run_key: RunKey, samples: Sequence[Sample]
) -> AsyncIterator[None]:
    """Hold the lease on the samples' range (claimed and released in threads: they block)."""
    if lease is None:
        yield
        return
    span = (min(s.index for s in samples), max(s.index for s in samples) + 1)
    held = await asyncio.to_thread(lease, run_key, span)
    await asyncio.to_thread(held.__enter__)
    try:
        yield
    finally:
        await asyncio.to_thread(held.__exit__, None, None, None)


class _Execution:
    """One call of run_benchmark: its state while pairs settle."""

    def __init__(
        self,
        benchmark: Benchmark,
        run: RunIdentity,
        solver: Solver,
        *,
        store: ResultStore,
        policy: WritePolicy,
        degrade_solver_errors: bool,
        on_progress: Callable[[Progress], None] | None,
    ) -> None:
        self.benchmark = benchmark
        self.run_identity = run
        self.solver = solver
        self.store = store
        self.policy = policy
        self.degrade_solver_errors = degrade_solver_errors
        self.on_progress = on_progress
        self.completed: list[SampleResult] = []
        self.deferred: list[SampleResult] = []
        self.progress = Progress(0, 0, 0, 0)
        self.durable = RunFold(run.run_key)  # the run key's log as this run knows it

    async def resume(self, indexes: set[int]) -> ResumeState:
        """The durable state of this chunk; on a failed read, warn and evaluate everything."""
        try:
            loaded = await self.store.load(self.run_identity.run_key)
        except ConfigurationError:
            raise  # settings that contradict the topic: paying again would not fix them
        except Exception as exc:  # any other failure to read means: evaluate everything
            log.warning("resume read failed, evaluating every pair: %s", exc)
            return ResumeState()
        for record in loaded.records:
            self.durable.offer(record)
        in_chunk = [record for record in loaded.records if record.sample_index in indexes]
        return ResumeState.of(in_chunk, self.run_identity.epochs, loaded.undecodable)

    async def run(
        self, samples: Sequence[Sample], resume: ResumeState, max_concurrency: int
    ) -> RunResult:
        """Evaluate the pairs not in the skip-list, then persist the degraded outcomes."""
        pending = [
            (sample, epoch)
            for sample, epoch in _pairs(samples, self.run_identity.epochs)
            if (sample.index, epoch) not in resume.skip_list
        ]
        total = len(samples) * self.run_identity.epochs
        self.progress = Progress(total, 0, total - len(pending), 0)
        self._report()
        await self._evaluate_all(pending, max_concurrency)
        # Only now that every pair has settled, and one at a time, so a degraded record can
        # never shadow a later success of the same key (nor, see _degraded, another writer's).
        # A failed degraded write fails the run too: fail-closed on purpose, so a successful
        # run means every record is durable.
        degraded = await persist_degraded(
            self.store, self.policy, self.run_identity.run_key, self.deferred
        )
        written = (*self.completed, *degraded.written, *degraded.superseded)
        for record in written:  # in write order, as the log has them
            self.durable.apply(record)
        return RunResult(
            summary=self.durable.summary(),
            records=tuple(
                sorted((*resume.seeds, *written), key=lambda r: (r.sample_index, r.epoch))
            ),
            skipped=len(resume.seeds),
            evaluated=len(pending),
            degraded=len(degraded.written),
        )

    async def _evaluate_all(self, pending: list[tuple[Sample, int]], limit: int) -> None:
        # A bounded window of tasks: a slow pair holds one slot, never the finished ones.
        slots = asyncio.Semaphore(limit)

        async def one(sample: Sample, epoch: int) -> None:
            try:
                await self._evaluate(sample, epoch)
            finally:
                slots.release()

        try:
            async with asyncio.TaskGroup() as group:
                for sample, epoch in pending:
                    await slots.acquire()
                    group.create_task(one(sample, epoch))
        except BaseExceptionGroup as failed:
            raise _first_error(failed) from None

    async def _evaluate(self, sample: Sample, epoch: int) -> None:
        with sample_scope(sample.id, epoch) as context:
            record = await self._outcome(sample, epoch, context)
        if record.degraded:
            self.deferred.append(record)
        else:
            await self.policy.write(self.store, record)
            self.completed.append(record)
        self._advance(record.degraded)

    async def _outcome(self, sample: Sample, epoch: int, context: SampleContext) -> SampleResult:
        run, ids = self.run_identity, context.generation_ids
        try:
            completion = await self.solver(self.benchmark, sample)
        except ModelError as err:
            verdict = classify_model_error(err)
            if verdict == "fatal":
                raise
            value = ScoreValue.S if verdict == "skip" else ScoreValue.I
            return degraded_record(
                run,
                sample,
                epoch,
                value=value,
                kind="model_error",
                message=str(err),
                http_status=err.status,
                generation_ids=ids,
            )
        except ProducerError:
            raise
        except Exception as exc:  # the solver is user code: anything it raises is its error
            return self._user_code_failed("solver", sample, epoch, exc, ids)
        try:
            scored = self.benchmark.score(sample, completion.text)
        except Exception as exc:  # scorers are user code too, classified like solvers
            return self._user_code_failed("scorer", sample, epoch, exc, ids)
        # What the solver actually sent; a solver that does not say gets the benchmark's prompt.
        prompt = list(completion.prompt) or self.benchmark.messages(sample)
        return completed_record(
            run,
            sample,
            epoch,
            prompt=prompt,
            completion=completion,
            scored=scored,
            generation_ids=ids,
        )

    def _user_code_failed(
        self, what: str, sample: Sample, epoch: int, exc: Exception, ids: list[str]
    ) -> SampleResult:
        """A degraded S record for a raising solver or scorer, or the run's failure."""
        if not self.degrade_solver_errors:
            raise SolverError(f"{what} failed on {sample.id} epoch {epoch}: {exc}") from exc
        return degraded_record(
            self.run_identity,
            sample,
            epoch,
            value=ScoreValue.S,
            kind=f"{what}_error",
            message=f"{type(exc).__name__}: {exc}",
            http_status=None,
            generation_ids=ids,
        )

    def _advance(self, degraded: bool) -> None:
        p = self.progress
        self.progress = Progress(p.total, p.done + 1, p.skipped, p.degraded + degraded)
        self._report()

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress)


def _select(
    samples: Sequence[Sample], sample_range: tuple[int, int] | None, name: str
) -> list[Sample]:
    """The samples of the range; a range (or a dataset) with none is an error, not a no-op."""
    if sample_range is None:
        if not samples:
            raise BenchmarkError(f"benchmark {name} has no samples")
        return list(samples)
    start, end = sample_range
    if not 0 <= start < end:
        raise ValueError(f"sample range must satisfy 0 <= start < end, got {start}:{end}")
    selected = [sample for sample in samples if start <= sample.index < end]
    if not selected:
        raise BenchmarkError(
            f"range {start}:{end} selects no sample of {name}, whose {len(samples)} samples "
            f"are 0:{len(samples)}"
        )
    return selected


def _pairs(samples: Sequence[Sample], epochs: int) -> Iterator[tuple[Sample, int]]:
    """The sample stream with epoch as the inner loop."""
    for sample in samples:
        for epoch in range(epochs):
            yield sample, epoch


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The error that failed the run, preferring our own over cancellations."""
    leaves: list[BaseException] = []

    def collect(error: BaseException) -> None:
        if isinstance(error, BaseExceptionGroup):
            for inner in error.exceptions:
                collect(inner)
        else:
            leaves.append(error)

    collect(group)
    ours = [error for error in leaves if isinstance(error, ResultLogError)]
    return (ours or leaves)[0]
