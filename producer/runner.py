"""The benchmark runner: evaluate (sample, epoch) pairs, persist each, resume from the log."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any

from resultlog.consumers import LoadedViews, ResumeState, RunFold, RunRecords
from resultlog.consumers.fold import Contribution
from resultlog.producer._budget import Admission, AdmissionFactory, Budget
from resultlog.producer._config import RunConfig, check_config, run_config
from resultlog.producer._degraded import DegradedWrites, persist_degraded
from resultlog.producer._placed import placed, relocate
from resultlog.producer._records import (
    Bill,
    RunIdentity,
    bill_after,
    completed_record,
    degraded_record,
)
from resultlog.producer._retry import WritePolicy
from resultlog.producer._schedule import (
    LeaseFactory,
    LeaseTakenOverError,
    first_error,
    holding,
    leased,
    lost,
    pairs,
    select,
)
from resultlog.producer.context import SampleContext, sample_scope
from resultlog.producer.datasets import Benchmark, Sample
from resultlog.producer.errors import ModelError, ProducerError, SolverError, UnansweredError
from resultlog.producer.lease import RunLease
from resultlog.producer.model_client import Completion, ModelClient, classify_model_error
from resultlog.producer.store import NoopResultStore, ResultStore
from resultlog.schemas import (
    ConfigurationError,
    FoldView,
    RunKey,
    RunSummary,
    SampleResult,
    ScoreValue,
)

__all__ = [
    "LeaseFactory",
    "LeaseTakenOverError",
    "Progress",
    "RunBudget",
    "RunOptions",
    "RunResult",
    "Solver",
    "WritePolicy",
    "config_solver",
    "model_solver",
    "run_benchmark",
]

log = logging.getLogger(__name__)

Solver = Callable[[Benchmark, Sample], Awaitable[Completion]]
_Durable = SampleResult | FoldView  # a record as the store loaded it: whole or its fold view


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
    `spent` is what this run's model attempts cost; `saved`, the kept cost of the durable
    records it skipped. `unstarted` pairs were not started because of the budget.
    """

    summary: RunSummary
    written: tuple[SampleResult, ...]
    skipped: int
    evaluated: int
    degraded: int
    spent: float = 0.0
    saved: float = 0.0
    unstarted: int = 0
    # Resume reads fold views: the skipped records are decoded whole only if `records` is read.
    skipped_records: Callable[[], Sequence[SampleResult]] = field(
        default=tuple, repr=False, compare=False
    )

    @cached_property
    def records(self) -> tuple[SampleResult, ...]:
        """The range's records: the durable ones skipped and this run's writes, by key."""
        records = (*self.skipped_records(), *self.written)
        return tuple(sorted(records, key=lambda r: (r.sample_index, r.epoch)))

    @property
    def stopped_by_budget(self) -> bool:
        """Whether the budget left pairs unstarted."""
        return self.unstarted > 0


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


def config_solver(client: ModelClient, config: RunConfig) -> Solver:
    """The default solver asking as `config` says (its model, temperature and max_tokens),
    so that the configuration the records carry is the one the model was asked with."""
    return model_solver(
        client, config.model, temperature=config.temperature, max_tokens=config.max_tokens
    )


@dataclass(frozen=True)
class RunOptions:
    """How a run goes: which pairs, how many at once, under which configuration."""

    epochs: int = 1
    max_concurrency: int = 8
    sample_range: tuple[int, int] | None = None
    """The half-open range of sample indexes to run (default: the whole dataset)."""
    degrade_solver_errors: bool = False
    """A solver's failure becomes a durable degraded record instead of stopping the run."""
    write_policy: WritePolicy | None = None
    chunk_id: str | None = None
    chunk_index: int | None = None
    config: RunConfig | None = None
    """What records carry (default: the benchmark's and model's, no endpoint or generation
    parameters); durable records of another configuration stop the run before any model call
    (ConfigChangedError) unless `accept_config_change`."""
    accept_config_change: bool = False


@dataclass(frozen=True)
class RunBudget:
    """A run's spend limit: no pair starts once the spend of what the store loads, plus this
    run's, would pass `usd`; while no pair's cost is known, `max_pair_usd` stands in for it.
    With `shared`, the budget is the run key's, kept with every other writer of it."""

    usd: float
    max_pair_usd: float | None = None
    shared: AdmissionFactory | None = None


async def run_benchmark(
    benchmark: Benchmark,
    model: str,
    *,
    run_id: str,
    solver: Solver,
    store: ResultStore | None = None,
    options: RunOptions = RunOptions(),
    budget: RunBudget | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    lease: LeaseFactory | None = None,
    draining: asyncio.Event | None = None,
) -> RunResult:
    """Run every (sample, epoch) of the range not already durable; return the run's result.

    With `lease`, the run holds a lease on its samples of the run key from before it reads
    the log until it returns, so no other leased run of an overlapping range pays for them.
    `options` say which pairs run and how (`RunOptions`), `budget` what they may spend. Once
    `draining` is set no pair starts: those in flight finish and are written, and the run
    returns with the rest unstarted (their answers are not paid for and then thrown away).
    """
    epochs, max_concurrency = options.epochs, options.max_concurrency
    if epochs < 1 or max_concurrency < 1:
        raise ValueError("epochs and max_concurrency must be >= 1")
    dataset = benchmark.samples()
    samples = select(dataset, options.sample_range, benchmark.name)
    run = RunIdentity(
        RunKey(run_id, benchmark.name, model),
        epochs,
        len(dataset),
        options.chunk_id,
        options.chunk_index,
        options.config or run_config(benchmark, model),
    )
    execution = _Execution(
        benchmark,
        run,
        solver,
        store=store or NoopResultStore(),
        policy=options.write_policy or WritePolicy(),
        degrade_solver_errors=options.degrade_solver_errors,
        on_progress=on_progress,
    )
    execution.draining = draining
    async with leased(lease, run.run_key, samples) as held, contextlib.AsyncExitStack() as stack:
        execution.held = held
        execution.holding = holding(held)
        try:
            indexes = {s.index for s in samples}
            resume = await execution.resume(indexes, options.accept_config_change)
            if budget is not None:
                await execution.open_budget(
                    stack, budget.usd, max_concurrency, budget.max_pair_usd, budget.shared
                )
            return await execution.run(samples, resume, max_concurrency)
        except asyncio.CancelledError:
            await execution.raise_if_taken_over()
            raise


def _wholes(
    seeds: Sequence[_Durable], whole: Callable[[FoldView], SampleResult] | None
) -> Callable[[], list[SampleResult]]:
    """What decodes the whole records of the seeds, when asked."""

    def decode() -> list[SampleResult]:
        if whole is None:  # the store loaded whole records
            return [seed for seed in seeds if isinstance(seed, SampleResult)]
        return [seed if isinstance(seed, SampleResult) else whole(seed) for seed in seeds]

    return decode


def _unanswered(run_key: RunKey, degraded: Sequence[SampleResult]) -> UnansweredError:
    """The error of a run none of whose pairs was answered, counting what came instead."""
    answers = Counter(
        f"HTTP {r.error.http_status}" if r.error and r.error.http_status else "no status"
        for r in degraded
    )
    said = ", ".join(f"{count} x {answer}" for answer, count in answers.most_common())
    return UnansweredError(
        f"{run_key}: no pair was answered ({said}); their degraded outcomes are durable",
        answers=said,
    )


def _in_chunk(
    loaded: RunRecords | LoadedViews, indexes: set[int], epochs: int, ids: Mapping[int, str]
) -> ResumeState[SampleResult] | ResumeState[FoldView]:
    """The resume state of the chunk's samples among the loaded records (matched by id)."""
    if isinstance(loaded, LoadedViews):
        views = [r for r in loaded.records if r.sample_index in indexes and placed(r, ids)]
        return ResumeState.of(views, epochs, loaded.undecodable)
    records = [r for r in loaded.records if r.sample_index in indexes and placed(r, ids)]
    return ResumeState.of(records, epochs, loaded.undecodable)


@dataclass(eq=False)
class _Execution:
    """One call of run_benchmark: its state while pairs settle."""

    benchmark: Benchmark
    run_identity: RunIdentity
    solver: Solver
    _: KW_ONLY
    store: ResultStore
    policy: WritePolicy
    degrade_solver_errors: bool
    on_progress: Callable[[Progress], None] | None
    completed: list[SampleResult] = field(default_factory=list, init=False)
    deferred: list[SampleResult] = field(default_factory=list, init=False)
    # What this run's pairs added to their keys' spend.
    spent_now: Fraction = field(default=Fraction(0), init=False)
    progress: Progress = field(default=Progress(0, 0, 0, 0), init=False)
    durable: RunFold = field(init=False)  # the run key's log as this run knows it
    # The keys' latest records.
    previous: dict[tuple[int, int], _Durable] = field(default_factory=dict, init=False)
    # A loaded view's record.
    whole: Callable[[FoldView], SampleResult] | None = field(default=None, init=False)
    most_spent: float = field(default=0.0, init=False)  # the most one key of the log has cost
    read_failed: bool = field(default=False, init=False)
    budget: Admission | None = field(default=None, init=False)
    held: RunLease | None = field(default=None, init=False)
    # Raises once the run's lease is lost.
    holding: Callable[[], None] = field(default=lambda: None, init=False)
    draining: asyncio.Event | None = field(default=None, init=False)  # set: start no more pairs

    def __post_init__(self) -> None:
        self.durable = RunFold(self.run_identity.run_key)

    async def resume(
        self, indexes: set[int], accept_config_change: bool
    ) -> ResumeState[SampleResult] | ResumeState[FoldView]:
        """The durable state of this chunk; on a failed read, warn and evaluate everything.

        Durable records of another configuration stop the run here, before any model call.
        """
        run = self.run_identity
        try:
            loaded = await self.store.load(run.run_key)
        except ConfigurationError:
            raise  # settings that contradict the topic: paying again would not fix them
        except Exception as exc:  # any other failure to read means: evaluate everything
            log.warning("resume read failed, evaluating every pair: %s", exc)
            self.read_failed = True
            return ResumeState[FoldView]()
        if isinstance(loaded, LoadedViews):
            self.whole = loaded.full
        if run.config is not None:
            check_config(
                run.run_key,
                run.config,
                loaded.records,
                accept=accept_config_change,
                whole=self.whole,
            )
        # Records belong to samples by id: a changed dataset moves samples to other indexes.
        ids = {sample.index: sample.id for sample in self.benchmark.samples()}
        moved = await relocate(
            self.store, self.policy, loaded.records, ids=ids, indexes=indexes, whole=self.whole
        )
        if moved:
            loaded = await self.store.load(run.run_key)  # with the copies at their places
            if isinstance(loaded, LoadedViews):
                self.whole = loaded.full
        for record in loaded.records:
            self.durable.offer(Contribution.of(record))
            self.most_spent = max(self.most_spent, record.spent)
        state = _in_chunk(loaded, indexes, run.epochs, ids)
        self.previous = {(r.sample_index, r.epoch): r for r in (*state.seeds, *state.degraded)}
        return state

    async def open_budget(
        self,
        stack: contextlib.AsyncExitStack,
        limit_usd: float,
        concurrency: int,
        max_pair_usd: float | None,
        shared: AdmissionFactory | None,
    ) -> None:
        """Keep the run within `limit_usd`: the run key's budget shared with every other
        writer of it (`shared`, held open by `stack`), else this run's own."""
        if shared is None:
            self.budget = self.budget_of(limit_usd, concurrency, max_pair_usd)
        else:
            opened = shared(self.run_identity.run_key, limit_usd, concurrency)
            self.budget = await stack.enter_async_context(opened)

    async def raise_if_taken_over(self) -> None:
        """After a cancellation: when the run's lease was taken over, that error instead
        (once what was produced has landed); else return, and the cancellation goes on."""
        taken_over = lost(self.held)
        if taken_over is None:
            return
        task = asyncio.current_task()
        if task is not None:  # the cancellation was ours: it becomes the error below
            task.uncancel()
        # What was produced before the takeover lands before the lease is released.
        await self.store.close()
        raise taken_over from None

    def budget_of(
        self, limit_usd: float, concurrency: int, max_pair_usd: float | None = None
    ) -> Budget:
        """The run's budget, from the spend of the records the store loaded."""
        if self.read_failed:  # an unknown spend cannot be kept within a budget
            raise ProducerError(
                f"{self.run_identity.run_key}: cannot read its spend from the log, "
                f"so its budget cannot be kept: not starting"
            )
        spent = self.durable.spent
        return Budget(
            limit_usd,
            spent=spent,
            estimate=self.most_spent,
            probe=concurrency,
            max_pair_usd=max_pair_usd,
        )

    async def run(
        self,
        samples: Sequence[Sample],
        resume: ResumeState[SampleResult] | ResumeState[FoldView],
        max_concurrency: int,
    ) -> RunResult:
        """Evaluate the pairs not in the skip-list, then persist the degraded outcomes."""
        pending = [
            (sample, epoch)
            for sample, epoch in pairs(samples, self.run_identity.epochs)
            if (sample.index, epoch) not in resume.skip_list
        ]
        total = len(samples) * self.run_identity.epochs
        self.progress = Progress(total, 0, total - len(pending), 0)
        self._report()
        try:
            started = await self._evaluate_all(pending, max_concurrency)
        except asyncio.CancelledError:
            # Stopped (SIGINT, SIGTERM): the pairs in flight are cancelled, so every pair has
            # settled; the finished degraded outcomes were paid for, and their attempts and
            # spend must reach the log before the run stops, or budgets under-count them.
            # A run whose lease was taken over writes nothing more.
            if lost(self.held) is None:
                await self._persist_degraded()
            raise
        # Only now that every pair has settled, and one at a time, so a degraded record can
        # never shadow a later success of the same key (nor, see _degraded, another writer's).
        # A failed degraded write fails the run too: fail-closed on purpose, so a successful
        # run means every record is durable.
        degraded = await self._persist_degraded()
        if started and self._unanswered(resume) and not degraded.superseded:
            # The endpoint answered no pair it was asked, and the log holds no answer of this
            # range either: it is wrong or broken, and a run that "succeeds" would hide it.
            raise _unanswered(self.run_identity.run_key, self.deferred)
        written = (*self.completed, *degraded.written, *degraded.superseded)
        for record in written:  # in write order, as the log has them
            self.durable.apply(record)
        return RunResult(
            summary=self.durable.summary(),
            written=written,
            skipped=len(resume.seeds),
            evaluated=started,
            degraded=len(degraded.written),
            spent=float(self.spent_now),
            saved=math.fsum(record.kept_cost for record in resume.seeds),
            unstarted=len(pending) - started,
            skipped_records=_wholes(resume.seeds, self.whole),
        )

    def _unanswered(self, resume: ResumeState[SampleResult] | ResumeState[FoldView]) -> bool:
        """No answer of the model in this run or the log: every outcome is a model error."""
        if self.completed or resume.seeds:
            return False
        return all(r.error is not None and r.error.kind == "model_error" for r in self.deferred)

    async def _persist_degraded(self) -> DegradedWrites:
        """Write the deferred degraded outcomes (see _degraded), once every pair has settled."""
        return await persist_degraded(
            self.store, self.policy, self.run_identity.run_key, self.deferred
        )

    async def _evaluate_all(self, pending: list[tuple[Sample, int]], limit: int) -> int:
        """Evaluate the pairs, `limit` at a time, until the budget or a drain stops them; how
        many ran."""
        # A bounded window of tasks: a slow pair holds one slot, never the finished ones.
        slots = asyncio.Semaphore(limit)
        started = 0

        async def one(sample: Sample, epoch: int) -> None:
            try:
                await self._evaluate(sample, epoch)
            finally:
                slots.release()

        try:
            async with asyncio.TaskGroup() as group:
                for sample, epoch in pending:
                    await slots.acquire()
                    if self.draining is not None and self.draining.is_set():
                        break
                    if self.budget is not None and not await self._admit(sample, epoch):
                        break
                    self.holding()
                    group.create_task(one(sample, epoch))
                    started += 1
        except BaseExceptionGroup as failed:
            raise first_error(failed) from None
        return started

    async def _admit(self, sample: Sample, epoch: int) -> bool:
        """Whether the budget lets the pair start (waiting for pairs in flight if need be)."""
        assert self.budget is not None
        before = self.previous.get((sample.index, epoch))
        spent = Fraction(before.spent if before else 0.0)
        return await self.budget.admit((sample.index, epoch), spent)

    async def _evaluate(self, sample: Sample, epoch: int) -> None:
        with sample_scope(sample.id, epoch) as context:
            record = await self._outcome(sample, epoch, context)
        before = self.previous.get((sample.index, epoch))
        added = Fraction(record.spent) - Fraction(before.spent if before else 0.0)
        self.spent_now += added
        if record.degraded:
            self.deferred.append(record)
        else:
            await self.policy.write(self.store, record)
            self.completed.append(record)
        if self.budget is not None:  # a ledger that fails now fails the run, the record safe
            await self.budget.settle((sample.index, epoch), added, Fraction(record.spent))
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
                bill=self._bill(sample, epoch, context, least_attempts=1),
            )
        except ProducerError:
            raise
        except Exception as exc:  # the solver is user code: anything it raises is its error
            bill = self._bill(sample, epoch, context)
            return self._user_code_failed("solver", sample, epoch, exc, ids, bill=bill)
        bill = self._bill(
            sample, epoch, context, least_attempts=completion.attempts, paid=completion
        )
        try:
            scored = self.benchmark.score(sample, completion.text)
        except Exception as exc:  # scorers are user code too, classified like solvers
            return self._user_code_failed("scorer", sample, epoch, exc, ids, bill=bill)
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
            bill=bill,
        )

    def _bill(
        self,
        sample: Sample,
        epoch: int,
        context: SampleContext,
        *,
        least_attempts: int = 0,
        paid: Completion | None = None,
    ) -> Bill:
        """The key's ledger after this run's attempts: its previous record's, plus these."""
        usage = paid.usage if paid is not None else None
        return bill_after(
            self.previous.get((sample.index, epoch)),
            context.attempt_costs,
            least_attempts=least_attempts,
            kept=(usage.cost or 0.0) if usage is not None else 0.0,
        )

    def _user_code_failed(
        self, what: str, sample: Sample, epoch: int, exc: Exception, ids: list[str], *, bill: Bill
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
            bill=bill,
        )

    def _advance(self, degraded: bool) -> None:
        p = self.progress
        self.progress = Progress(p.total, p.done + 1, p.skipped, p.degraded + degraded)
        self._report()

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(self.progress)
