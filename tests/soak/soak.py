"""The soak's conductor: starts everything, runs workload, nemesis and checker for SOAK_S
seconds, then settles, checks once more and stops everything it started."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx

from resultlog.broker import free_ports
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import is_expected_degraded
from resultlog.settings import Settings
from tests.soak.checker import Violation
from tests.soak.cluster import PARTITIONS, Aggregator, Cluster, ModelProcess, soak_env
from tests.soak.history import LogTail, RequestLog
from tests.soak.nemesis import Nemesis
from tests.soak.probe import Plant, Probe
from tests.soak.report import Outcome
from tests.soak.workload import Workload
from tests.support.cli import cli_argv

__all__ = ["Soak"]

AGGREGATORS = 3
ERROR_RATE = 0.05  # pairs the offline model always fails: degraded, retried on resume
_CHECK_EVERY_S = 3.0
_STEP_S = 0.2
_READY_TIMEOUT_S = 180.0
_SETTLE_S = 15.0
_SLOW_STEP_S = 2.0
_RESTART_AFTER_S = 5.0  # an instance that exited by itself is started again after this
T = TypeVar("T")


class Soak:
    """One soak; `run()` then `stop()` (always)."""

    def __init__(self, seed: int, seconds: float, planted: bool) -> None:
        self.rng = random.Random(seed)
        self.seconds = seconds
        self.outcome = Outcome(seed=seed, seconds=0.0, planted=planted)
        self.root = Path(tempfile.mkdtemp(prefix="resultlog-soak-"))
        self.cluster = Cluster(self.root / "kafka")
        self.model = ModelProcess("model server", self.root / "logs" / "model.log")
        self.aggregators: list[Aggregator] = []
        self._seen: set[tuple[str, str]] = set()
        self._crashed: dict[str, float] = {}  # instances that exited by themselves: when
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self._started = False
        self.kafka: KafkaConnection | None = None
        self.workload: Workload | None = None
        self.nemesis: Nemesis | None = None
        self.probe: Probe | None = None
        self.tail: LogTail | None = None

    def clock(self) -> float:
        """Seconds since the faults began."""
        return time.monotonic() - self._t0 if self._started else 0.0

    # -- start -------------------------------------------------------------------------------

    def _start(self) -> None:
        bootstrap = self.cluster.up()
        env = soak_env(bootstrap)
        created = subprocess.run(
            cli_argv("topics", "create"), env=env, capture_output=True, text=True, timeout=180
        )
        if created.returncode != 0:
            raise RuntimeError(f"topics create failed: {created.stderr.strip()}")
        settings = Settings(
            bootstrap_servers=bootstrap,
            partitions=PARTITIONS,
            replication_factor=3,
            min_insync_replicas=2,
        )
        self.kafka = KafkaConnection(settings)
        log = self.root / "requests.jsonl"
        seed = self.outcome.seed
        base_url = self.model.start(env, log, seed, ERROR_RATE)
        for name, port in zip(("a1", "a2", "a3"), free_ports(AGGREGATORS), strict=False):
            logs = self.root / "logs" / f"{name}.log"
            self.aggregators.append(Aggregator(name, logs, port=port, state_dir=self.root / name))
        for aggregator in self.aggregators:
            aggregator.start(env)
        self._wait_ready()
        requests = RequestLog(log)
        self.workload = Workload(
            self.rng, self.kafka, env, base_url, self.root / "workers", requests, self.report,
            self.clock,
        )  # fmt: skip
        self.nemesis = Nemesis(
            self.rng, self.kafka, self.cluster, self.aggregators, self.workload, env, self.clock
        )
        self.tail = LogTail(self.kafka)

        def degraded(sample_id: str, epoch: int) -> bool:
            return is_expected_degraded(sample_id, epoch, seed=seed, error_rate=ERROR_RATE)

        plant = Plant(self.outcome.planted)
        self.probe = Probe(
            self.aggregators, self.workload, self.tail, requests, degraded, plant, self.clock
        )
        self._env = env

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        with httpx.Client(timeout=2.0) as client:
            for aggregator in self.aggregators:
                while True:
                    if not aggregator.alive:
                        raise RuntimeError(f"{aggregator.name} exited: {aggregator.tail()}")
                    try:
                        if client.get(f"{aggregator.url}/healthz").status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{aggregator.name} not ready: {aggregator.tail()}")
                    time.sleep(0.5)

    # -- run ---------------------------------------------------------------------------------

    def run(self) -> None:
        """Start everything, then faults, work and checks for `seconds`."""
        self._start()
        assert self.workload is not None and self.nemesis is not None
        self._t0, self._started = time.monotonic(), True
        checker = threading.Thread(target=self._check_loop, name="soak checker", daemon=True)
        checker.start()
        next_fault = self.rng.uniform(2.0, 6.0)
        while self.clock() < self.seconds:
            self._timed("workload", self.workload.poll)
            self._timed("watch", self._watch_aggregators)
            if self.clock() >= next_fault:
                if not self._timed("nemesis", self.nemesis.step):
                    print(f"soak: [{self.clock():7.1f}s] no fault allowed now", file=sys.stderr)
                next_fault = self.clock() + self.rng.uniform(4.0, 10.0)
            time.sleep(_STEP_S)
        self.outcome.seconds = self.clock()
        self._stop.set()
        checker.join(120)
        self._finish()

    def _timed(self, what: str, step: Callable[[], T]) -> T:
        """A step of the loop; one that held it up is said (on stderr, the soak's log)."""
        started = time.monotonic()
        result = step()
        took = time.monotonic() - started
        if took > _SLOW_STEP_S:
            print(f"soak: [{self.clock():7.1f}s] {what} took {took:.1f}s", file=sys.stderr)
        return result

    def _finish(self) -> None:
        """Undo every fault, stop the workers, let the aggregators catch up, check again."""
        assert self.workload is not None and self.nemesis is not None
        self.nemesis.settle()
        self.workload.stop()
        self.workload.poll_ended()
        deadline = time.monotonic() + _SETTLE_S
        while time.monotonic() < deadline:
            self._watch_aggregators()
            time.sleep(1.0)
        self._check()

    def _watch_aggregators(self) -> None:
        """An instance that exited by itself is a violation; it is started again."""
        assert self.nemesis is not None
        for aggregator in self.aggregators:
            if aggregator.alive or aggregator.expected_exit or self.nemesis.busy(aggregator.name):
                continue
            crashed = self._crashed.get(aggregator.name)
            if crashed is None:
                aggregator.reap(5.0)
                assert aggregator.process is not None
                code = aggregator.process.returncode
                detail = f"{aggregator.name} exited {code} by itself: {aggregator.tail(2)}"
                self.report(Violation("aggregator exited", detail, self.clock()))
                self._crashed[aggregator.name] = self.clock()
            elif self.clock() > crashed + _RESTART_AFTER_S:
                del self._crashed[aggregator.name]
                aggregator.start(self._env)

    def _check_loop(self) -> None:
        while not self._stop.wait(_CHECK_EVERY_S):
            self._check()

    def _check(self) -> None:
        assert self.probe is not None
        try:
            found, compared = self.probe.round()
        except Exception as exc:  # a check that could not read: said, not counted
            with self._lock:
                self.outcome.incidents.append(
                    f"[{self.clock():7.1f}s] check failed: {type(exc).__name__}: {exc}"
                )
            return
        for violation in found:
            self.report(violation)
        if compared:
            with self._lock:
                self.outcome.checks += 1

    def report(self, violation: Violation) -> None:
        """Record a violation once (a check that finds it again adds nothing)."""
        with self._lock:
            key = (violation.kind, violation.detail)
            if key in self._seen:
                return
            self._seen.add(key)
            self.outcome.violations.append(violation)
        print(f"soak: VIOLATION {violation.line()}", flush=True)

    # -- stop --------------------------------------------------------------------------------

    def stop(self) -> Outcome:
        """Stop everything it started (whatever state it is in); the outcome."""
        self._stop.set()
        if self.nemesis is not None:
            self.nemesis.close()
        outcome = self.outcome
        outcome.seconds = outcome.seconds or self.clock()
        if self.workload is not None:
            self.workload.stop()
            outcome.runs = len(self.workload.runs)
            done = [r for r in self.workload.runs.values() if r.state in ("finished", "purged")]
            outcome.finished = len(done)
            outcome.records = sum(r.records for r in done)
            outcome.worker_summaries = self.workload.summaries_checked
            outcome.incidents[:0] = self.workload.incidents
        if self.nemesis is not None:
            outcome.faults = self.nemesis.counts
            outcome.history = self.nemesis.history
        if self.probe is not None:
            outcome.compared = self.probe.compared
            outcome.requests = self.probe.requests()
            self.probe.close()
        for aggregator in self.aggregators:
            aggregator.terminate()
        self.model.terminate()
        if self.tail is not None:
            self.tail.close()
        try:
            self.cluster.stop()
        except Exception as exc:  # said; the folder is kept to look at
            print(f"soak: stopping the brokers failed: {exc}", flush=True)
        if outcome.violations or outcome.incidents:
            print(f"soak: logs kept in {self.root}", flush=True)
        else:
            shutil.rmtree(self.root, ignore_errors=True)
        return outcome
