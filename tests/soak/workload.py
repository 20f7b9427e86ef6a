"""The soak's writers: `resultlog run` processes writing runs of random sizes through the
offline model, resumed after a kill, their printed summaries checked against replay, and
`resultlog purge` of finished runs."""

from __future__ import annotations

import json
import random
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from confluent_kafka import KafkaException, TopicPartition

from resultlog.consumers import read_run_records, replay_run
from resultlog.kafka import KafkaConnection
from resultlog.schemas import ResultLogError, RunKey, partition_for
from tests.soak.checker import Attempt, Violation, worker_violation
from tests.soak.cluster import PARTITIONS, Proc
from tests.soak.history import RequestLog
from tests.support.cli import cli_argv

__all__ = ["BENCHMARK", "Run", "Workload"]

BENCHMARK = "arith"
_SLOTS = 2
_PURGE_TIMEOUT_S = 90.0
# A killed worker's last requests may still be on their way into the model server's log:
# its run is resumed only after this, so the next attempt's lines begin after them.
_RESUME_AFTER_S = 3.0
_READ_FOR_S = 60.0
T = TypeVar("T")


@dataclass
class Run:
    """One run key the soak writes: its size, attempts and fate."""

    run_id: str
    limit: int
    epochs: int
    concurrency: int
    state: str = "new"  # new, running, interrupted, finished, purging, purged
    generation: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    purged_end: int | None = None  # the partition's end once its last purge was durable
    # (None: never purged, or that end could not be read)
    records: int = 0  # records of its last successful attempt's summary
    ended_at: float = 0.0  # when its last attempt ended (soak clock)

    @property
    def model(self) -> str:
        """The model name: it names the run in the model server's request log."""
        return f"offline/{self.run_id}"

    @property
    def key(self) -> RunKey:
        """The run key."""
        return RunKey(self.run_id, BENCHMARK, self.model)

    @property
    def partition(self) -> int:
        """The results partition of its records."""
        return partition_for(self.key, PARTITIONS)


class Workload:
    """Keeps two workers busy: a resume of an interrupted run first, else a new run or,
    now and then, a purged run again."""

    def __init__(
        self,
        rng: random.Random,
        kafka: KafkaConnection,
        env: dict[str, str],
        base_url: str,
        root: Path,
        requests: RequestLog,
        report: Callable[[Violation], None],
        clock: Callable[[], float],
    ) -> None:
        self.rng, self._kafka, self._env, self._base_url = rng, kafka, env, base_url
        self._root, self._requests, self._report, self._clock = root, requests, report, clock
        self.lock = threading.RLock()
        self.runs: dict[str, Run] = {}
        self.workers: dict[str, Proc] = {}  # run id -> its running attempt
        self.summaries_checked = 0
        self.incidents: list[str] = []

    # -- the loop's step ---------------------------------------------------------------------

    def poll(self) -> None:
        """Settle ended workers, then fill the free slots."""
        self.poll_ended()
        while len(self.workers) < _SLOTS:
            run = self._next_run()
            self._start(run)

    def poll_ended(self) -> None:
        """Settle the workers that ended."""
        for run_id, proc in list(self.workers.items()):
            if not proc.alive:
                self._ended(self.runs[run_id], proc)

    def _next_run(self) -> Run:
        with self.lock:
            ready = self._clock() - _RESUME_AFTER_S
            waiting = [
                r for r in self.runs.values() if r.state == "interrupted" and r.ended_at < ready
            ]
            purged = [r for r in self.runs.values() if r.state == "purged"]
        if waiting and self.rng.random() < 0.8:
            return self.rng.choice(waiting)
        if purged and self.rng.random() < 0.15:
            return self.rng.choice(purged)
        run = Run(
            f"r{len(self.runs):03d}",
            limit=self.rng.randint(5, 60),
            epochs=self.rng.choice((1, 1, 2)),
            concurrency=self.rng.choice((1, 2, 3)),
        )
        with self.lock:
            self.runs[run.run_id] = run
        return run

    def _start(self, run: Run) -> None:
        argv = cli_argv(
            "run", BENCHMARK, "--model", run.model, "--run-id", run.run_id, "--json",
            "--limit", str(run.limit), "--epochs", str(run.epochs),
            "--concurrency", str(run.concurrency), "--base-url", self._base_url,
        )  # fmt: skip
        attempt = Attempt(run.model, run.generation, self._requests.refresh())
        proc = Proc(f"worker {run.run_id}", self._root / f"{run.run_id}.{len(run.attempts)}.log")
        with self.lock:
            run.attempts.append(attempt)
            run.state = "running"
            proc.spawn(argv, self._env)
            self.workers[run.run_id] = proc

    def _ended(self, run: Run, proc: Proc) -> None:
        """A worker exited: check its summary, or note what it left durable."""
        proc.reap(5.0)
        assert proc.process is not None
        code = proc.process.returncode
        attempt = run.attempts[-1]
        printed = _printed_summary(proc.log) if code == 0 else None
        if printed is not None:
            self._check_printed(run, printed)
            run.records = int(printed.get("records", 0))
            run.state = "finished"
        else:
            attempt.durable_after = self._durable(run)
            run.state = "interrupted"
            if not proc.expected_exit:
                line = f"[{self._clock():7.1f}s] worker {run.run_id} exited {code}: {proc.tail(2)}"
                self.incidents.append(line)
                print(f"soak: incident {line}", flush=True)
        attempt.ended = True
        run.ended_at = self._clock()
        with self.lock:
            del self.workers[run.run_id]

    def _check_printed(self, run: Run, printed: dict[str, Any]) -> None:
        result = self._read(f"replay {run.run_id}", lambda: replay_run(self._kafka, run.key))
        if result is None:
            return
        replayed = result.summaries.get(run.key)
        expected = None
        if replayed is not None and replayed.records:
            expected = replayed.model_dump(mode="json")
        self.summaries_checked += 1
        found = worker_violation(run.run_id, printed, expected, self._clock())
        if found is not None:
            self._report(found)

    def _durable(self, run: Run) -> frozenset[tuple[str, int]] | None:
        """The pairs whose latest record is complete (a resume must not ask them again);
        None when the log could not be read (then no repeat across this end is judged)."""
        found = self._read(
            f"records of {run.run_id}", lambda: read_run_records(self._kafka, run.key)
        )
        if found is None:
            return None
        return frozenset((r.sample_id, r.epoch) for r in found.records if not r.degraded)

    def _read(self, what: str, read: Callable[[], T]) -> T | None:
        """A read of the log, tried again while a broker restarts (a leader's high watermark
        not caught up yet); None, said as an incident, when it never succeeds."""
        deadline = time.monotonic() + _READ_FOR_S
        while True:
            try:
                return read()
            except (ResultLogError, KafkaException) as exc:
                if time.monotonic() > deadline:
                    line = f"[{self._clock():7.1f}s] could not read {what}: {exc}"
                    self.incidents.append(line)
                    print(f"soak: incident {line}", flush=True)
                    return None
                time.sleep(2.0)

    # -- what the nemesis does to workers ----------------------------------------------------

    def running(self) -> list[tuple[str, Proc]]:
        """The running (not stopped) workers."""
        with self.lock:
            return [(run_id, p) for run_id, p in self.workers.items() if p.up]

    def finished(self) -> list[Run]:
        """Runs whose last attempt succeeded (purgeable)."""
        with self.lock:
            return [r for r in self.runs.values() if r.state == "finished"]

    def purge(self, run: Run) -> tuple[bool, str]:
        """`resultlog purge` a finished run; note where its tombstones end. Whether it was
        purged, and what happened."""
        with self.lock:
            run.state = "purging"
        argv = cli_argv("purge", "--run-id", run.run_id, "--benchmark", BENCHMARK)
        done = subprocess.run(
            [*argv, "--model", run.model, "--yes", "--json"],
            env=self._env,
            capture_output=True,
            text=True,
            timeout=_PURGE_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            with self.lock:
                run.state = "finished"
            last = (done.stderr.strip().splitlines() or ["(nothing said)"])[-1]
            return False, f"purge of {run.run_id} exited {done.returncode}: {last}"
        end = self._read(f"the end of p{run.partition}", lambda: self._end_of(run.partition))
        with self.lock:
            run.purged_end, run.state = end, "purged"
            run.generation += 1
        return True, f"purged {run.run_id} ({run.records} records, p{run.partition} up to {end})"

    def _end_of(self, partition: int) -> int:
        consumer = self._kafka.reader()
        try:
            tp = TopicPartition(self._kafka.results_topic, partition)
            return int(consumer.get_watermark_offsets(tp, timeout=30, cached=False)[1])
        finally:
            consumer.close()

    def stop(self) -> None:
        """Stop every worker (their runs stay interrupted)."""
        for proc in list(self.workers.values()):
            proc.terminate()

    def attempts(self) -> dict[str, list[Attempt]]:
        """Every run's attempts, by the model name its requests carry."""
        with self.lock:
            return {run.model: list(run.attempts) for run in self.runs.values()}


def _printed_summary(log: Path) -> dict[str, Any] | None:
    """The JSON summary a successful `run --json` printed last."""
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except json.JSONDecodeError:
                return None
            if isinstance(found, dict) and "run_id" in found:
                found.pop("as_of", None)
                return found
    return None
