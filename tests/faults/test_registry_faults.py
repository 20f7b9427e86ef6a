"""A real Apicurio Registry behind a proxy that answers 503 or stalls; readers without one.

- a 503 blip while resuming is retried: nothing durable is paid for again;
- a registry that keeps failing or stalls is a one-line error in seconds, never a hang;
- a stalled registry never freezes the worker's event loop, nor the aggregator's HTTP API, and
  the aggregator dead-letters nothing for it;
- a reader without a registry URL on a topic of registry-framed records stops with one line
  (status, replay, run before any model call, the aggregator) instead of seeing garbage.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest

from resultlog.consumers.aggregator import Aggregator, HttpServer, create_app
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import ModelServer
from resultlog.producer.store import KafkaResultStore
from resultlog.schemas import RunKey, SampleResult
from resultlog.settings import Settings
from tests.faults.registry_proxy import RegistryProxy, registry_proxy
from tests.support.aggregator import path
from tests.support.apicurio import ApicurioRegistry, start_apicurio
from tests.support.audit import report
from tests.support.cli import child_env, cli_argv, run_cli
from tests.support.kafka import message_count, raw_run_records
from tests.support.records import make_record
from tests.support.runs import MODEL
from tests.support.summaries import bare, expected
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

SAMPLES, EPOCHS = 25, 2
RUN_KEY = ("--run-id", "framed", "--benchmark", "arith", "--model", MODEL)
REGISTRY_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def apicurio() -> Iterator[ApicurioRegistry]:
    """A real Apicurio Registry for this module's tests."""
    with start_apicurio() as registry:
        yield registry


@pytest.fixture
def proxy(apicurio: ApicurioRegistry) -> Iterator[RegistryProxy]:
    """The registry behind a proxy this test controls."""
    with registry_proxy(apicurio.url) as running:
        yield running


@pytest.fixture
def framed(settings: Settings, proxy: RegistryProxy) -> Settings:
    """The test's topics, written and read in registry framing through the proxy."""
    update = {"schema_registry_url": proxy.url, "schema_registry_timeout_s": REGISTRY_TIMEOUT_S}
    return settings.model_copy(update=update)


def _run(settings: Settings, run_id: str, base_url: str) -> subprocess.CompletedProcess[str]:
    args = ["run", "arith", "--model", MODEL, "--run-id", run_id, "--limit", str(SAMPLES)]
    return run_cli(
        child_env(settings), *args, "--epochs", str(EPOCHS), "--base-url", base_url, "--json"
    )


def _status(settings: Settings, run_id: str) -> subprocess.CompletedProcess[str]:
    args = ["status", "--run-id", run_id, "--benchmark", "arith", "--model", MODEL, "--json"]
    return run_cli(child_env(settings), *args)


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and lines[0].startswith("resultlog: error: "), done.stderr
    return lines[0]


def test_a_registry_blip_while_resuming_pays_for_nothing_again(
    framed: Settings, proxy: RegistryProxy
) -> None:
    with ModelServer(latency_s=0.001) as server:
        first = _run(framed, "blip", server.base_url)
        assert first.returncode == 0, first.stderr
        status = json.loads(_status(framed, "blip").stdout)
        degraded = status["degraded"]
        asked = len(server.requests)
        proxy.fail_next("/schemas/ids/", 2)  # the resume's first lookups of the writer schema
        again = _run(framed, "blip", server.base_url)
        assert again.returncode == 0, again.stderr
        resumed = server.requests[asked:]
    assert proxy.answered(503, "/schemas/ids/") == 2
    # Only the degraded pairs are asked again (each up to 1 + 3 retries): never a durable one.
    assert len({(r.sample_id, r.epoch) for r in resumed}) == degraded
    assert status["completed"] == SAMPLES * EPOCHS - degraded
    report("registry-blip", injected_503=2, durable=status["completed"], paid_again=0)


def test_a_failing_or_stalled_registry_is_one_line_in_seconds(
    framed: Settings, proxy: RegistryProxy
) -> None:
    with ModelServer(latency_s=0.001) as server:
        assert _run(framed, "down", server.base_url).returncode == 0
    proxy.fail_next("/schemas/ids/", 1000)
    started = time.monotonic()
    failing = _one_line(_status(framed, "down"))
    failing_s = time.monotonic() - started
    assert "schema registry" in failing and "503" in failing, failing
    proxy.fail_next("/schemas/ids/", 0)
    proxy.stall()
    started = time.monotonic()
    stalled = _one_line(_status(framed, "down"))
    stalled_s = time.monotonic() - started
    proxy.release()
    assert "schema registry" in stalled and "timed out" in stalled.lower(), stalled
    # Within a 12 s deadline: 4 attempts of 1 s each with 0.2/0.4/0.8 s (+-50%) between.
    assert failing_s < 15 and stalled_s < 20, (failing_s, stalled_s)
    report("registry-down", status_503_s=f"{failing_s:.1f}", status_stalled_s=f"{stalled_s:.1f}")


def test_a_stalled_registry_never_freezes_the_worker_event_loop(
    framed: Settings, proxy: RegistryProxy
) -> None:
    run_key = RunKey("loop", "arith", MODEL)

    async def go() -> float:
        store = KafkaResultStore(KafkaConnection(framed))
        gaps: list[float] = []
        try:
            proxy.stall()  # the store's first write registers the schema: it waits
            write = asyncio.create_task(store.write(make_record(0, 0, run_key=run_key)))
            last = time.monotonic()
            for _ in range(40):
                await asyncio.sleep(0.05)
                now = time.monotonic()
                gaps.append(now - last)
                last = now
            assert not write.done()
            proxy.release()
            await asyncio.wait_for(write, 30)
        finally:
            await store.close()
        return max(gaps)

    worst_gap = asyncio.run(go())
    assert worst_gap < 0.5, worst_gap
    assert len(raw_run_records(framed, run_key)) == 1
    report("registry-stall-loop", stalled_s=2.0, worst_tick_gap_s=f"{worst_gap:.2f}")


def test_the_aggregator_waits_out_a_stalled_registry_and_dead_letters_nothing(
    framed: Settings, proxy: RegistryProxy
) -> None:
    run_key = RunKey("agg", "arith", MODEL)
    records = [make_record(i, e, run_key=run_key, epochs=2) for i in range(20) for e in range(2)]
    _write(framed, records)
    proxy.stall()
    aggregator = Aggregator(KafkaConnection(framed), publish_interval_s=0.05)
    server = HttpServer(create_app(aggregator), "127.0.0.1", 0)
    server.start_in_thread()
    try:
        aggregator.start()
        stalled_until = time.monotonic() + 8.0  # longer than one registry call's deadline
        while time.monotonic() < stalled_until:
            started = time.monotonic()
            health = httpx.get(server.url + "/healthz", timeout=5)
            assert time.monotonic() - started < 1.0 and health.status_code == 503
            time.sleep(0.5)
        proxy.release()
        wait_for(lambda: aggregator.health().ready, "the aggregator to catch up")
        served = wait_for(lambda: _served(server.url, run_key), "the run to be served")
        assert aggregator.running and aggregator.failure is None
    finally:
        aggregator.stop()
        server.close()
    assert served == expected(framed, run_key)
    assert message_count(framed, framed.dlq_topic) == 0
    report("registry-stall-aggregator", stalled_s=8, dead_lettered=0, healthz_slow=0)


def test_a_reader_without_a_registry_refuses_registry_framed_records(
    framed: Settings, settings: Settings
) -> None:
    with ModelServer(latency_s=0.001) as server:
        assert _run(framed, "framed", server.base_url).returncode == 0
        run_key = RunKey("framed", "arith", MODEL)
        written = len(raw_run_records(settings, run_key))
        asked = len(server.requests)
        refusals = {
            "status": _status(settings, "framed"),
            "replay": run_cli(child_env(settings), "replay", *RUN_KEY),
            "run": _run(settings, "framed", server.base_url),
        }
        assert len(server.requests) == asked  # nothing paid for again
    for command, done in refusals.items():
        line = _one_line(done)
        assert "no registry is configured" in line, (command, line)
        assert "RESULTLOG_SCHEMA_REGISTRY_URL" in line, (command, line)
    assert len(raw_run_records(settings, run_key)) == written  # nothing rewritten
    process = subprocess.Popen(
        cli_argv("aggregator", "--http", "127.0.0.1:0"),
        env=child_env(settings),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 1
    assert "no registry is configured" in stderr.strip().splitlines()[-1]
    assert message_count(settings, settings.dlq_topic) == 0
    report("registry-missing", refused=len(refusals) + 1, paid_again=0, dead_lettered=0)


def _write(settings: Settings, records: list[SampleResult]) -> None:
    async def go() -> None:
        store = KafkaResultStore(KafkaConnection(settings))
        try:
            await asyncio.gather(*map(store.write, records))
        finally:
            await store.close()

    asyncio.run(go())


def _served(base_url: str, run_key: RunKey) -> dict[str, object] | None:
    response = httpx.get(base_url + path(run_key), timeout=5)
    return bare(response.json()) if response.status_code == 200 else None
