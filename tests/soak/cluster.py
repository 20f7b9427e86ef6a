"""What the soak runs: a three-broker cluster, the offline model, aggregator instances, each a
real process of our own launcher and CLI, all on loopback."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from resultlog.broker import LocalKafka
from tests.support.cli import cli_argv

__all__ = ["Aggregator", "Cluster", "ModelProcess", "Proc", "soak_env"]

PARTITIONS = 3
LEASE_TTL_S = 20.0
_UP_TIMEOUT_S = 240.0


def soak_env(bootstrap: str, **extra: str) -> dict[str, str]:
    """The environment of every process the soak starts: its cluster, replicated topics."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESULTLOG_")}
    env.update(
        RESULTLOG_BOOTSTRAP_SERVERS=bootstrap,
        RESULTLOG_PARTITIONS=str(PARTITIONS),
        RESULTLOG_REPLICATION_FACTOR="3",
        RESULTLOG_MIN_INSYNC_REPLICAS="2",
        RESULTLOG_LEASE_TTL_S=str(LEASE_TTL_S),
        RESULTLOG_AGGREGATOR_STANDBY_REPLICAS="1",
        RESULTLOG_AGGREGATOR_SAVE_INTERVAL_S="1",
        RESULTLOG_AGGREGATOR_STORE_MEMORY_MB="16",
        # A degraded pair is asked twice at most per attempt, quickly.
        RESULTLOG_MODEL_MAX_RETRIES="1",
        RESULTLOG_MODEL_RETRY_BACKOFF_S="0.05",
        RESULTLOG_MODEL_TIMEOUT_S="60",
    )
    env.update(extra)
    return env


@dataclass
class Proc:
    """A child process of the soak: running, stopped (SIGSTOP) or down."""

    name: str
    log: Path
    process: subprocess.Popen[bytes] | None = None
    stopped: bool = False
    expected_exit: bool = False  # the soak killed or stopped it: its exit is no news
    _out: IO[bytes] | None = field(default=None, repr=False)

    def spawn(self, argv: list[str], env: dict[str, str]) -> None:
        """Start it, its output appended to its log."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._out = self.log.open("ab")
        self.process = subprocess.Popen(argv, env=env, stdout=self._out, stderr=subprocess.STDOUT)
        self.stopped, self.expected_exit = False, False

    @property
    def up(self) -> bool:
        """Running and not stopped."""
        return self.alive and not self.stopped

    @property
    def alive(self) -> bool:
        """The process exists (maybe stopped)."""
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int:
        """Its process id."""
        assert self.process is not None
        return self.process.pid

    def signal(self, signum: signal.Signals) -> None:
        """Send a signal if it still runs."""
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)
        self.stopped = signum == signal.SIGSTOP

    def kill(self) -> None:
        """kill -9, and reap it."""
        self.expected_exit = True
        self.signal(signal.SIGKILL)
        self.reap(10.0)

    def terminate(self, timeout_s: float = 20.0) -> None:
        """SIGTERM (after SIGCONT when stopped), then SIGKILL past the timeout."""
        if self.process is None:
            return
        self.expected_exit = True
        if self.stopped:
            self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        if not self.reap(timeout_s):
            self.signal(signal.SIGKILL)
            self.reap(10.0)

    def reap(self, timeout_s: float) -> bool:
        """Wait for the exit; True when it ended."""
        if self.process is None:
            return True
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return False
        if self._out is not None:
            self._out.close()
            self._out = None
        return True

    def tail(self, lines: int = 3) -> str:
        """The last lines of its log, in one line."""
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])


@dataclass
class Aggregator(Proc):
    """An aggregator instance: its HTTP port and state directory outlive its processes."""

    port: int = 0
    state_dir: Path = Path()
    starts: int = 0

    def start(self, env: dict[str, str]) -> None:
        """Start (again) on the same port and state directory."""
        self.starts += 1
        address = f"127.0.0.1:{self.port}"
        argv = cli_argv("-v", "aggregator", "--http", address, "--state-dir", str(self.state_dir))
        self.spawn(argv, env)

    @property
    def url(self) -> str:
        """Its HTTP API."""
        return f"http://127.0.0.1:{self.port}"


class ModelProcess(Proc):
    """`resultlog model-server` with a request log; its base URL once it listens."""

    def start(self, env: dict[str, str], request_log: Path, seed: int, error_rate: float) -> str:
        """Start it and wait for its port."""
        port_file = self.log.parent / "model.port"
        port_file.unlink(missing_ok=True)
        options = ["--port-file", str(port_file), "--request-log", str(request_log)]
        options += ["--latency-ms", "20", "--seed", str(seed), "--error-rate", str(error_rate)]
        self.spawn(cli_argv("model-server", *options), env)
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if not self.alive or time.monotonic() > deadline:
                raise RuntimeError(f"the model server did not start: {self.tail()}")
            time.sleep(0.05)
        return f"http://127.0.0.1:{int(port_file.read_text())}/v1"


class Cluster:
    """The three brokers (`resultlog kafka up --brokers 3`), by node id."""

    NODES = (1, 2, 3)

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.local = LocalKafka(directory)
        self.bootstrap = ""
        self.down: set[int] = set()

    def up(self) -> str:
        """Start the cluster; its bootstrap address."""
        done = subprocess.run(
            cli_argv("kafka", "up", "--brokers", "3", "--port", "0", "--dir", str(self.directory)),
            capture_output=True,
            text=True,
            timeout=_UP_TIMEOUT_S,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"kafka up failed: {done.stderr.strip()}")
        self.bootstrap = done.stdout.strip()
        return self.bootstrap

    def stop_node(self, node: int, *, kill: bool) -> None:
        """kill -9 (or stop) one broker."""
        self.down.add(node)
        self.local.stop_node(node, kill=kill)

    def start_node(self, node: int) -> None:
        """Start a stopped broker and wait until the cluster serves."""
        try:
            self.local.start_node(node, timeout=120.0)
        finally:
            self.down.discard(node)

    def stop(self) -> None:
        """Stop every broker."""
        self.local.down()
