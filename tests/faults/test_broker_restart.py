"""The broker stopped (SIGTERM) or killed (SIGKILL) at different points of a run, then restarted.

Each trial either completes the run with every record durable, or fails it with a
PersistenceError after which the same run completes it; the log then holds exactly one latest
record per (sample, epoch), no raw record twice, and the same summary as an undisturbed run.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from resultlog.broker import LocalKafka
from resultlog.producer import PersistenceError, Progress
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.offline import ModelServer, is_expected_degraded
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.audit import all_pairs, audit, report
from tests.support.kafka import topic_settings
from tests.support.runs import MODEL, run_once
from tests.support.summaries import bare, expected

pytestmark = pytest.mark.faults

SAMPLES, EPOCHS = 40, 2
ERROR_RATE = 0.1  # a few degraded pairs in every run, so the degraded phase is exercised


@dataclass(frozen=True)
class Trial:
    """When and how the broker goes away, and how patient the writer is."""

    name: str
    at: float  # fraction of the pairs settled when the broker goes
    kill: bool  # SIGKILL (a crash) rather than SIGTERM (a clean stop)
    delivery_timeout_ms: int = 1500
    restart_at_once: bool = False  # restart while the run goes on, instead of after it


TRIALS = [
    Trial("sigterm-early", at=0.2, kill=False),
    Trial("sigkill-midway", at=0.5, kill=True),
    # Every pair has settled and every success is durable: only the degraded writes remain.
    Trial("sigkill-degraded-phase", at=1.0, kill=True),
    # A writer patient enough (20 s) rides out a restart without failing the run.
    Trial("sigkill-restart-ridden-out", at=0.3, kill=True, delivery_timeout_ms=20_000,
          restart_at_once=True),
]  # fmt: skip


def _saboteur(
    kafka: LocalKafka, trial: Trial, total: int
) -> tuple[list[threading.Thread], Callable[[Progress], None]]:
    """An on_progress callback taking the broker away once `trial.at` of the pairs settled."""
    threads: list[threading.Thread] = []

    def outage() -> None:
        kafka.stop_node(1, kill=trial.kill)
        if trial.restart_at_once:
            kafka.start_node(1)

    def on_progress(progress: Progress) -> None:
        if threads or progress.done < trial.at * total:
            return
        threads.append(threading.Thread(target=outage))
        threads[0].start()
        if trial.at >= 1.0:
            threads[0].join()  # the broker is gone before the first degraded write

    return threads, on_progress


@pytest.fixture(scope="module")
def reference(restartable_kafka: LocalKafka) -> dict[str, object]:
    """The summary of the same run, undisturbed."""
    settings = topic_settings(restartable_kafka.bootstrap)
    bench = limit_samples(arith(), SAMPLES)
    with ModelServer(latency_s=0.0, error_rate=ERROR_RATE) as server:
        run = run_once(settings, bench, "reference", server.base_url, epochs=EPOCHS)
        return bare(asyncio.run(run).summary)


def _comparable(summary: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in summary.items() if k not in ("run_id", "generation_time_ms")}


@pytest.mark.parametrize("trial", TRIALS, ids=lambda t: t.name)
async def test_broker_outage_loses_and_duplicates_nothing(
    trial: Trial,
    restartable_kafka: LocalKafka,
    restartable_settings: Settings,
    reference: dict[str, object],
) -> None:
    bench = limit_samples(arith(), SAMPLES)
    run_key = RunKey(trial.name, bench.name, MODEL)
    with ModelServer(latency_s=0.05, error_rate=ERROR_RATE) as server:
        degraded = [
            (s.id, e)
            for s in bench.samples()
            for e in range(EPOCHS)
            if is_expected_degraded(s.id, e, error_rate=ERROR_RATE)
        ]
        assert degraded, "the trial needs degraded pairs"
        threads, on_progress = _saboteur(restartable_kafka, trial, SAMPLES * EPOCHS)
        outcome = "completed"
        try:
            result = await run_once(
                restartable_settings,
                bench,
                trial.name,
                server.base_url,
                epochs=EPOCHS,
                delivery_timeout_ms=trial.delivery_timeout_ms,
                on_progress=on_progress,
            )
        except PersistenceError:
            outcome = "failed, re-run completed"
            for thread in threads:
                thread.join()
            restartable_kafka.start_node(1)
            result = await run_once(
                restartable_settings, bench, trial.name, server.base_url, epochs=EPOCHS
            )
        for thread in threads:
            thread.join()
        assert threads, "the broker was never taken away"

    found = audit(restartable_settings, run_key, all_pairs(SAMPLES, EPOCHS))
    from_log = expected(restartable_settings, run_key)
    wrong = int(_comparable(from_log) != _comparable(reference))
    wrong += int(bare(result.summary) != from_log)
    report(
        "broker-restart",
        trial=trial.name,
        outcome=outcome,
        lost=found.lost,
        duplicates=found.duplicates,
        extra=found.extra,
        raw=found.raw,
        wrong_summaries=wrong,
    )
    if trial.restart_at_once:
        assert outcome == "completed"
    assert found.clean, found
    assert found.latest == SAMPLES * EPOCHS
    assert wrong == 0, (from_log, reference)
