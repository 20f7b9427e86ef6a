"""A misbehaving model endpoint: design rule 6 holds; a failed run writes no degraded.

No HTTP status (a timeout, a reset or closed connection, a malformed body) fails the run with a
one-line error; 429 and 5xx give a degraded S, 400 a degraded I.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from resultlog.consumers import read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.producer import ModelError
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.offline import Behavior, Fault, ModelServer
from resultlog.schemas import RunKey, SampleResult, ScoreValue
from resultlog.settings import Settings
from tests.support.audit import report
from tests.support.cli import child_env, one_line_error, run_cli
from tests.support.runs import MODEL, run_once

pytestmark = pytest.mark.faults

SAMPLES = 10
# (fault, error text, requests made): timeouts and transport errors get the one retry.
FATAL: list[tuple[Fault, str, int]] = [
    ("hang", "model request timed out", 2),
    ("malformed", "model response is not JSON", 1),
    ("reset", "model request failed", 2),
    ("close", "model request failed", 2),
]


def _records(settings: Settings, run_id: str) -> list[SampleResult]:
    records, undecodable, *_ = read_run_records(
        KafkaConnection(settings), RunKey(run_id, "arith", MODEL)
    )
    assert undecodable == 0
    return records


@pytest.mark.parametrize(("fault", "message", "requests"), FATAL, ids=[f[0] for f in FATAL])
def test_a_fault_without_status_fails_the_run_with_one_line_and_no_degraded_record(
    fault: Fault, message: str, requests: int, settings: Settings
) -> None:
    run_id = f"fatal-{fault}"
    with ModelServer(latency_s=0.01) as server:
        server.override("arith-0001", 0, Behavior(status=429))  # degraded: deferred, never written
        server.override("arith-0007", 0, Behavior(fault=fault, status=200))
        started = time.monotonic()
        done = run_cli(
            child_env(settings, RESULTLOG_MODEL_TIMEOUT_S="0.5", RESULTLOG_MODEL_MAX_RETRIES="1"),
            *["run", "arith", "--model", MODEL, "--run-id", run_id, "--limit", str(SAMPLES)],
            *["--concurrency", "2", "--json", "--base-url", server.base_url],
        )
        elapsed = time.monotonic() - started
        attempts = server.request_count("arith-0007", 0)
    assert done.returncode == 1, done.stderr
    assert message in one_line_error(done)
    assert attempts == requests
    records = _records(settings, run_id)
    assert not [r for r in records if r.degraded]
    assert all(r.sample_id != "arith-0007" for r in records)
    report("model-fault", fault=fault, seconds=round(elapsed, 1), degraded_written=0, lost=0)


async def test_statuses_degrade_as_designed(settings: Settings) -> None:
    bench = limit_samples(arith(), SAMPLES)
    expected = {
        "arith-0001": (Behavior(status=429), ScoreValue.S, 429),
        "arith-0002": (Behavior(status=503), ScoreValue.S, 503),
        "arith-0003": (Behavior(status=500), ScoreValue.S, 500),
        "arith-0004": (Behavior(status=400), ScoreValue.I, 400),
    }
    with ModelServer(latency_s=0.0) as server:
        for sample_id, (behavior, _, _) in expected.items():
            server.override(sample_id, 0, behavior)
        # A 500 that clears on the retry is no degradation at all.
        server.override("arith-0005", 0, Behavior(status=500), Behavior())
        result = await run_once(
            settings, bench, "statuses", server.base_url, epochs=1, max_retries=1
        )
    by_id = {r.sample_id: r for r in _records(settings, "statuses")}
    assert len(by_id) == SAMPLES
    for sample_id, (_, value, status) in expected.items():
        record = by_id[sample_id]
        assert record.degraded and record.score.value == value
        assert record.error is not None and record.error.http_status == status
    assert not by_id["arith-0005"].degraded
    assert result.degraded == len(expected)
    assert result.summary.skipped_questions == 3
    report("model-statuses", degraded=result.degraded, lost=0, wrong_summaries=0)


def test_a_hang_is_bounded_by_the_client_timeout(settings: Settings) -> None:
    bench = limit_samples(arith(), 3)
    with ModelServer(latency_s=0.0) as server:
        server.override("arith-0000", 0, Behavior(fault="hang"))
        started = time.monotonic()
        with pytest.raises(ModelError, match="timed out") as failed:
            asyncio.run(run_once(settings, bench, "hang", server.base_url, timeout_s=0.3))
        elapsed = time.monotonic() - started
    assert failed.value.kind == "timeout" and failed.value.status is None
    assert elapsed < 10
