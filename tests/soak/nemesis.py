"""The nemesis: faults picked at random (seeded) under the safety rules, each undone within a
bound on a thread of its own, so a slow undo never delays another."""

from __future__ import annotations

import random
import shutil
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

from resultlog.kafka import KafkaConnection
from resultlog.topics import ensure_topics
from tests.soak.cluster import LEASE_TTL_S, Aggregator, Cluster, Proc
from tests.soak.workload import Run, Workload

__all__ = ["KINDS", "Nemesis"]

KINDS = (
    "aggregator kill",
    "aggregator stop",
    "worker kill",
    "worker stop",
    "broker kill",
    "broker restart",
    "changelog recreate",
    "compaction window",
    "store corrupt",
    "new machine",
    "purge",
)
# Shorter than the lease TTL: a stopped writer keeps its lease (and an aggregator comes back
# while a hand-over may be under way: its session timeout is 10 s).
_MAX_STOP_S = 0.7 * LEASE_TTL_S
_ALTER_ATTEMPTS = 5
_COMPACTION = {
    "segment.ms": "1000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "0",
    "min.compaction.lag.ms": "0",
}


class Nemesis:
    """Injects one fault a step; `history` holds what it did, `counts` how often each kind."""

    def __init__(
        self,
        rng: random.Random,
        kafka: KafkaConnection,
        cluster: Cluster,
        aggregators: list[Aggregator],
        workload: Workload,
        env: dict[str, str],
        clock: Callable[[], float],
    ) -> None:
        self.rng, self._kafka, self._cluster = rng, kafka, cluster
        self._aggregators, self._workload = aggregators, workload
        self._env, self._clock = env, clock
        self.history: list[str] = []
        self.counts: Counter[str] = Counter()
        self._busy: set[str] = set()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._bag: list[str] = []
        self._closed = False
        self._starting = threading.Lock()  # held while an undo starts a process

    def busy(self, name: str) -> bool:
        """Whether a fault holds `name` (an instance down on purpose)."""
        return name in self._busy

    # -- picking ---------------------------------------------------------------------------

    def step(self) -> bool:
        """Inject one fault: of the first kind in a shuffled bag that is allowed now (so each
        kind comes as often), else of any kind allowed now (so faults keep coming while the
        bag's are forbidden)."""
        if not self._bag:
            self._bag = list(KINDS)
            self.rng.shuffle(self._bag)
        others = [kind for kind in KINDS if kind not in self._bag]
        self.rng.shuffle(others)
        for kind in [*self._bag, *others]:
            action = self._plan(kind)
            if action is not None:
                if kind in self._bag:
                    self._bag.remove(kind)
                self.counts[kind] += 1
                action()
                return True
        return False

    def _plan(self, kind: str) -> Callable[[], None] | None:
        """What injecting `kind` would do now, or None when the safety rules forbid it."""
        if kind in ("aggregator kill", "aggregator stop", "store corrupt", "new machine"):
            return self._plan_aggregator(kind)
        if kind in ("worker kill", "worker stop"):
            running = self._workload.running()
            if not running:
                return None
            run_id, proc = self.rng.choice(running)
            if kind == "worker kill":
                return lambda: self._kill_worker(run_id, proc)
            pause = self.rng.uniform(2.0, _MAX_STOP_S)
            return lambda: self._pause(kind, f"worker {run_id}", proc, pause)
        if kind in ("broker kill", "broker restart"):
            if self._cluster.down or "broker" in self._busy:
                return None
            node = self.rng.choice(Cluster.NODES)
            return lambda: self._background("broker", lambda: self._broker(kind, node))
        if kind in ("changelog recreate", "compaction window"):
            if kind in self._busy:
                return None
            work = self._recreate if kind == "changelog recreate" else self._compact
            return lambda: self._background(kind, work)
        finished = self._workload.finished()
        if not finished:
            return None
        run = self.rng.choice(finished)
        return lambda: self._background(f"purge {run.run_id}", lambda: self._purge(run))

    def _plan_aggregator(self, kind: str) -> Callable[[], None] | None:
        free = [a for a in self._aggregators if a.up and a.name not in self._busy]
        if kind == "store corrupt":  # only an instance that has a store to break
            free = [a for a in free if any(a.state_dir.glob("*/*/CURRENT"))]
        up = [a for a in self._aggregators if a.up]
        if len(free) < 1 or len(up) < 2:  # at least one aggregator stays up
            return None
        target = self.rng.choice(free)
        self._busy.add(target.name)
        if kind == "aggregator stop":
            pause = self.rng.uniform(2.0, _MAX_STOP_S)
            return lambda: self._pause(kind, target.name, target, pause)
        down_s = self.rng.uniform(2.0, 10.0)
        return lambda: self._down(kind, target, down_s)

    # -- injecting -------------------------------------------------------------------------

    def _purge(self, run: Run) -> None:
        done, what = self._workload.purge(run)
        if not done:  # not a fault after all: the run stays finished, to be purged later
            self.counts["purge"] -= 1
        self._note("purge" if done else "purge failed", what)

    def _kill_worker(self, run_id: str, proc: Proc) -> None:
        self._note("worker kill", f"kill -9 worker {run_id}")
        proc.kill()

    def _pause(self, kind: str, name: str, proc: Proc, pause_s: float) -> None:
        self._note(kind, f"SIGSTOP {name} for {pause_s:.1f}s")
        proc.signal(signal.SIGSTOP)

        def resume() -> None:
            time.sleep(pause_s)
            proc.signal(signal.SIGCONT)
            self._busy.discard(name)

        self._background(name, resume, mark=False)

    def _down(self, kind: str, target: Aggregator, down_s: float) -> None:
        target.kill()
        what = f"kill -9 {target.name}, down {down_s:.1f}s"
        if kind == "store corrupt":
            what += ", " + corrupt_store(self.rng, target.state_dir)
        if kind == "new machine":
            shutil.rmtree(target.state_dir, ignore_errors=True)
            what += ", its state directory deleted"
        self._note(kind, what)

        def restart() -> None:
            time.sleep(down_s)
            self._unless_closed(lambda: target.start(self._env))
            self._busy.discard(target.name)

        self._background(target.name, restart, mark=False)

    def _broker(self, kind: str, node: int) -> None:
        kill = kind == "broker kill"
        down_s = self.rng.uniform(3.0, 12.0) if kill else self.rng.uniform(0.5, 3.0)
        how = "kill -9" if kill else "SIGTERM"
        self._note(kind, f"{how} broker {node}, down {down_s:.1f}s")
        self._cluster.stop_node(node, kill=kill)
        time.sleep(down_s)
        self._unless_closed(lambda: self._cluster.start_node(node))

    def _recreate(self) -> None:
        topic = self._kafka.settings.changelog_topic
        self._note("changelog recreate", f"delete and create {topic}")
        admin = self._kafka.admin()
        admin.delete_topics([topic])[topic].result(30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                ensure_topics(self._kafka, timeout_s=30)
                return
            except Exception:  # still marked for deletion: try again shortly
                time.sleep(1.0)
        self._note("error", f"could not create {topic} again")

    def _compact(self) -> None:
        topic = self._kafka.settings.changelog_topic
        window_s = self.rng.uniform(10.0, 25.0)
        self._note("compaction window", f"{topic} compacted hard for {window_s:.1f}s")
        admin = self._kafka.admin()
        resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
        before = admin.describe_configs([resource])[resource].result(30)
        try:
            _alter(admin, topic, _COMPACTION)
            time.sleep(window_s)
        finally:
            _alter(admin, topic, {name: before[name].value for name in _COMPACTION})

    # -- bookkeeping -----------------------------------------------------------------------

    def _note(self, kind: str, what: str) -> None:
        line = f"[{self._clock():7.1f}s] {kind}: {what}"
        with self._lock:
            self.history.append(line)
        print(f"soak: {line}", flush=True)

    def _background(self, name: str, work: Callable[[], None], *, mark: bool = True) -> None:
        if mark:
            self._busy.add(name)

        def body() -> None:
            try:
                work()
            except Exception as exc:  # a fault that could not be done or undone: said
                self._note("error", f"{name}: {exc!r}")
            finally:
                if mark:
                    self._busy.discard(name)

        thread = threading.Thread(target=body, name=f"nemesis {name}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _unless_closed(self, start: Callable[[], None]) -> None:
        """Start something again, unless the soak is stopping (it would outlive the soak)."""
        with self._starting:
            if not self._closed:
                start()

    def close(self) -> None:
        """Start nothing from now on (undos still under way finish first)."""
        with self._starting:
            self._closed = True

    def settle(self, timeout_s: float = 180.0) -> None:
        """Wait for every fault to be undone."""
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def _alter(admin: object, topic: str, values: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient

    assert isinstance(admin, AdminClient)
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in values.items()
    ]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    for attempt in range(_ALTER_ATTEMPTS):  # a loaded controller may time out: try again
        try:
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(30)
            return
        except Exception:
            if attempt == _ALTER_ATTEMPTS - 1:
                raise
            time.sleep(2.0)


def corrupt_store(rng: random.Random, state_dir: Path) -> str:
    """Break one RocksDB store under a stopped instance's state directory: garbage in its
    CURRENT file, or one of its SST files deleted. Says which."""
    # A partition's store is TOPIC/PARTITION; what was set aside elsewhere is left alone.
    stores = sorted(p.parent for p in state_dir.rglob("CURRENT") if p.parent.name.isdigit())
    if not stores:
        return "no store to corrupt yet"
    store = rng.choice(stores)
    tables = sorted(store.glob("*.sst"))
    if tables and rng.random() < 0.5:
        victim = rng.choice(tables)
        victim.unlink()
        return f"deleted {victim.relative_to(state_dir)}"
    (store / "CURRENT").write_bytes(b"\x00garbage")
    return f"garbage in {(store / 'CURRENT').relative_to(state_dir)}"
