"""Rescore a run from the log: a new scorer over its stored answers, written as another run."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from resultlog.consumers import LoadedViews, RunFold, RunRecords
from resultlog.consumers.fold import Contribution
from resultlog.consumers.resume import Covered
from resultlog.producer._budget import Budget
from resultlog.producer._retry import WritePolicy
from resultlog.producer._schedule import LeaseFactory, first_error, leased
from resultlog.producer.context import sample_scope
from resultlog.producer.datasets import Sample
from resultlog.producer.errors import ModelError
from resultlog.producer.model_client import classify_model_error
from resultlog.producer.rescore._answer import stored_answer
from resultlog.producer.rescore._errors import RescoreError
from resultlog.producer.rescore._grader import Grader
from resultlog.producer.rescore._scorer import RecordScorer
from resultlog.producer.runner import Progress
from resultlog.producer.store import ResultStore
from resultlog.schemas import (
    TRUSTED_JSON,
    FoldView,
    RecordStatus,
    RunKey,
    RunSummary,
    SampleResult,
    ScoreValue,
    WriterProcess,
)

__all__ = ["RescoreConfig", "RescoreResult", "rescore_config", "rescore_run"]

_Durable = SampleResult | FoldView


@dataclass(frozen=True)
class RescoreConfig:
    """The configuration a rescored run's records carry: source run, scorer, grader."""

    canonical: str
    fingerprint: str


@dataclass(frozen=True)
class RescoreResult:
    """A finished rescore: the new run's summary and what became of each source record."""

    summary: RunSummary
    source: RunKey
    rescored: int  # answers scored and written in this session
    skipped: int  # already durable in the new run (a resumed rescore)
    degraded: int  # degraded source records copied as they are
    unanswered: tuple[tuple[str, int], ...]  # (sample id, epoch) with no stored answer
    grader_failed: int  # pairs whose grader call failed (degraded in the new run)
    grader_calls: int  # model attempts of the grader in this session
    new_spend: float  # what the grader cost in this session (0 without a grader)
    carried_spend: float  # the source's bill the new run's records carry unchanged
    unstarted: int = 0  # pairs the budget left unscored
    undecodable: int = 0  # source values that could not be decoded


def rescore_config(
    source: Sequence[SampleResult],
    scorer: str,
    grader: Grader | None,
    covered: Covered | None = None,
) -> RescoreConfig:
    """The rescored run's configuration: the source run (its newest configuration, how many
    records and the results offsets they were read from), the scorer and the grader, as
    canonical JSON with its sha256."""
    newest = max(source, key=lambda r: (r.created_at, r.sample_index, r.epoch))
    offsets = None if covered is None else covered._asdict()
    value: dict[str, Any] = {
        "format": 1,
        "model": newest.model,
        "benchmark": {"name": newest.benchmark_id},
        "scorer": scorer,
        "rescored_from": {
            "run_id": newest.run_id,
            "config_fingerprint": newest.config_fingerprint,
            "records": len(source),
            "offsets": offsets,
        },
        "grader": None
        if grader is None
        else {"model": grader.model, "base_url": grader.client.base_url, **grader.params},
    }
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return RescoreConfig(canonical, hashlib.sha256(canonical.encode()).hexdigest())


async def rescore_run(
    source: RunRecords,
    as_run_id: str,
    scorer: RecordScorer,
    *,
    store: ResultStore,
    grader: Grader | None = None,
    lease: LeaseFactory | None = None,
    max_concurrency: int = 8,
    write_policy: WritePolicy | None = None,
    budget_usd: float | None = None,
    on_progress: Callable[[Progress], None] | None = None,
) -> RescoreResult:
    """Score every stored answer of `source` with `scorer`; write them as run `as_run_id`.

    The new run's records keep the source's answers, usage and bill; only the score, the
    configuration and (with a grader) the grader's attempts and spend are new. Its durable
    records are skipped, as `run`'s resume does, so a killed rescore asks no grader twice.
    """
    if not source.records:
        raise RescoreError("the source run has no records to rescore")
    first = source.records[0]
    target = RunKey(as_run_id, first.benchmark_id, first.model)
    if as_run_id == first.run_id:
        raise RescoreError(f"--as {as_run_id} is the source run: name a new run")
    if scorer.graded and grader is None:
        raise RescoreError(f"scorer {scorer.name} asks a model: give a grader (--grader-model)")
    config = rescore_config(
        source.records, scorer.name, grader if scorer.graded else None, source.covered
    )
    job = _Rescore(
        target,
        scorer,
        grader=grader,
        store=store,
        policy=write_policy or WritePolicy(),
        config=config,
    )
    job.on_progress = on_progress
    samples = [Sample(r.sample_id, r.input, r.target, index=r.sample_index) for r in source.records]
    async with leased(lease, target, samples):
        loaded = await store.load(target)
        job.seed(loaded)
        if budget_usd is not None and scorer.graded:
            job.budget = job.budget_of(loaded, source.records, budget_usd, max_concurrency)
        await job.all(sorted(source.records, key=lambda r: r.key), max_concurrency)
    return job.result(first.run_key, source.undecodable)


class _Rescore:
    """One call of rescore_run: its state while records are scored and written."""

    def __init__(
        self,
        target: RunKey,
        scorer: RecordScorer,
        *,
        grader: Grader | None,
        store: ResultStore,
        policy: WritePolicy,
        config: RescoreConfig,
    ) -> None:
        self.target, self.scorer, self.grader = target, scorer, grader
        self.store, self.policy, self.config = store, policy, config
        self.durable = RunFold(target)
        self.skip: set[tuple[int, int]] = set()  # scored already: never asked again
        self.present: set[tuple[int, int]] = set()  # any record, degraded copies too
        self.budget: Budget | None = None
        self.on_progress: Callable[[Progress], None] | None = None
        self.worker = WriterProcess(host=socket.gethostname(), pid=os.getpid())
        self.counts = {"rescored": 0, "skipped": 0, "degraded": 0, "failed": 0, "calls": 0}
        self.unanswered: list[tuple[str, int]] = []
        self.spent_now = Fraction(0)
        self.carried = Fraction(0)
        self.unstarted = 0
        self.total = self.done = self.degraded_now = 0

    def seed(self, loaded: RunRecords | LoadedViews) -> None:
        """The new run's durable records: fold them, skip the scored ones, refuse another
        configuration's."""
        foreign = [
            r
            for r in loaded.records
            if not r.degraded
            and r.config_fingerprint is not None
            and r.config_fingerprint != self.config.fingerprint
        ]
        if foreign:
            raise RescoreError(
                f"{self.target} holds {len(foreign)} record(s) scored under another "
                "configuration (another source, scorer or grader): choose a new --as"
            )
        for record in loaded.records:
            self.durable.offer(Contribution.of(record))
            self.present.add((record.sample_index, record.epoch))
            if not record.degraded:
                self.skip.add((record.sample_index, record.epoch))

    def budget_of(
        self,
        loaded: RunRecords | LoadedViews,
        source: Sequence[SampleResult],
        limit_usd: float,
        concurrency: int,
    ) -> Budget:
        """The grader's budget: what the new run's durable records added to the source's bill."""
        carried = {(r.sample_index, r.epoch): r.spent for r in source}
        added = [
            Fraction(r.spent) - Fraction(carried.get((r.sample_index, r.epoch), 0.0))
            for r in loaded.records
        ]
        most = max((float(a) for a in added), default=0.0)
        return Budget(limit_usd, spent=sum(added, Fraction(0)), estimate=most, probe=concurrency)

    async def all(self, records: Sequence[SampleResult], limit: int) -> None:
        """Score the records not yet durable, `limit` at a time."""
        self.total = len(records)
        self.carried = sum((Fraction(r.spent) for r in records if self._kept(r)), Fraction(0))
        pending = [r for r in records if not self._done(r)]
        self.counts["skipped"] = self.total - len(pending)
        self._report()
        slots = asyncio.Semaphore(limit)

        async def one(record: SampleResult) -> None:
            try:
                await self._one(record)
            finally:
                slots.release()

        try:
            async with asyncio.TaskGroup() as group:
                for record in pending:
                    await slots.acquire()
                    if self._asks(record) and not await self._admitted(record):
                        slots.release()  # spent: the grader is asked no more, copies go on
                        self.unstarted += 1
                        continue
                    group.create_task(one(record))
        except BaseExceptionGroup as failed:
            raise first_error(failed) from None

    def _done(self, record: SampleResult) -> bool:
        """Whether the new run holds the record's outcome already: scored, or a degraded
        source record copied (a pair whose grader failed is not done)."""
        pair = (record.sample_index, record.epoch)
        return pair in self.skip or (record.degraded and pair in self.present)

    @staticmethod
    def _kept(record: SampleResult) -> bool:
        """Whether the new run keeps the record (and the bill it carries)."""
        return record.degraded or stored_answer(record) is not None

    async def _admitted(self, record: SampleResult) -> bool:
        """Whether the budget (if any, and not spent yet) lets the grader be asked."""
        if self.budget is None:
            return True
        if self.unstarted:  # the budget said no once: it never says yes again
            return False
        return await self.budget.admit((record.sample_index, record.epoch))

    def _asks(self, record: SampleResult) -> bool:
        """Whether scoring the record asks the grader."""
        return self.scorer.graded and not record.degraded and stored_answer(record) is not None

    async def _one(self, record: SampleResult) -> None:
        """Score (or copy) one source record and make the new one durable."""
        if record.degraded:
            written = self._copy(record, score=None)
            self.counts["degraded"] += 1
        elif stored_answer(record) is None:
            self.unanswered.append((record.sample_id, record.epoch))
            self._advance(False)
            return
        else:
            written = await self._scored(record)
        await self.policy.write(self.store, written)
        self.durable.apply(written)
        self._advance(written.degraded)

    async def _scored(self, record: SampleResult) -> SampleResult:
        """The record with its new score (and the grader's bill, if a grader was asked)."""
        with sample_scope(record.sample_id, record.epoch) as context:
            try:
                score = await self.scorer.score(record, self.grader)
                failed = None
            except ModelError as err:
                if classify_model_error(err) == "fatal":
                    raise
                score, failed = None, err
        costs = context.attempt_costs
        added = Fraction(math.fsum(costs))
        self.counts["calls"] += len(costs)
        self.spent_now += added
        if self.budget is not None:
            await self.budget.settle((record.sample_index, record.epoch), added)
        bill: dict[str, Any] = {
            "attempts": (record.attempts or 0) + len(costs),
            "spent_cost": record.spent + float(added),
            "generation_ids": tuple(
                dict.fromkeys([*record.generation_ids, *context.generation_ids])
            ),
        }
        if failed is not None:
            self.counts["failed"] += 1
            return self._copy(record, score=None, error=failed, **bill)
        self.counts["rescored"] += 1
        return self._copy(record, score=score, **bill)

    def _copy(
        self,
        record: SampleResult,
        *,
        score: dict[str, Any] | None,
        error: ModelError | None = None,
        **changed: Any,
    ) -> SampleResult:
        """The source record as the new run's: its key, configuration, writer and time."""
        fields = record.model_dump()
        fields |= {
            "run_id": self.target.run_id,
            "config": self.config.canonical,
            "config_fingerprint": self.config.fingerprint,
            "worker": self.worker,
            "created_at": datetime.now(UTC),
            "chunk_id": None,
            "chunk_index": None,
            **changed,
        }
        if score is not None:
            fields |= score  # the new `score`, and what else the scorer changed
        if error is not None:  # the grader failed: degraded, asked again on resume
            fields |= {
                "status": RecordStatus.DEGRADED,
                "score": {"value": ScoreValue.S, "explanation": f"degraded: grader: {error}"},
                "error": {
                    "kind": "grader_error",
                    "message": str(error),
                    "http_status": error.status,
                },
            }
        return SampleResult.model_validate(fields, context=TRUSTED_JSON)

    def result(self, source: RunKey, undecodable: int) -> RescoreResult:
        """What the rescore did, with the new run's summary."""
        counts = self.counts
        return RescoreResult(
            summary=self.durable.summary(),
            source=source,
            rescored=counts["rescored"],
            skipped=counts["skipped"],
            degraded=counts["degraded"],
            unanswered=tuple(self.unanswered),
            grader_failed=counts["failed"],
            grader_calls=counts["calls"],
            new_spend=float(self.spent_now),
            carried_spend=float(self.carried),
            unstarted=self.unstarted,
            undecodable=undecodable,
        )

    def _advance(self, degraded: bool) -> None:
        self.done += 1
        self.degraded_now += degraded
        self._report()

    def _report(self) -> None:
        if self.on_progress is not None:
            progress = Progress(self.total, self.done, self.counts["skipped"], self.degraded_now)
            self.on_progress(progress)
