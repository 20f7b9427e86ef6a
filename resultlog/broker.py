"""A local Apache Kafka cluster (KRaft, combined broker+controller nodes) run from Maven jars."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from resultlog._jars import KAFKA_VERSION, fetch_kafka_jars, require_executable
from resultlog.errors import BrokerError

__all__ = ["LocalKafka", "default_kafka_dir", "free_port", "free_ports"]

_HEAP = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC"]
_LOG4J = """status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.kafka.name = org.apache.kafka
logger.kafka.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""


def default_kafka_dir() -> Path:
    """Where `kafka up` keeps its data when no --dir is given."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "resultlog" / "kafka"


def free_port() -> int:
    """A port on 127.0.0.1 that the OS says is free now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """Distinct ports on 127.0.0.1 that the OS says are free now."""
    # All sockets stay open until every port is known, or the OS may hand one out twice.
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the broker binds: connections of a stopped broker in TIME_WAIT must not count.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass
class _Node:
    node_id: int
    port: int
    controller_port: int


@dataclass
class _ClusterState:
    cluster_id: str
    nodes: list[_Node] = field(default_factory=list)
    version: str = KAFKA_VERSION

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)


class LocalKafka:
    """A KRaft cluster of one or more nodes living in one directory."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = (directory or default_kafka_dir()).resolve()
        self._children: dict[int, subprocess.Popen[bytes]] = {}

    # -- public API ---------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        """The bootstrap address of the cluster as last configured."""
        return self._load_state().bootstrap

    def up(self, port: int | None = None, brokers: int = 1, timeout: float = 90.0) -> str:
        """Start the cluster unless it already runs; wait until it serves; return bootstrap."""
        java = require_executable("java", "a Java 17+ runtime is needed to run Kafka")
        state = self._prepare_state(port, brokers)
        if all(self._running_pid(n) for n in state.nodes):
            return state.bootstrap
        libs = fetch_kafka_jars()
        for node in state.nodes:
            if self._running_pid(node) is None:
                self._start_node(java, libs, state, node)
        self._wait_ready(state, timeout)
        return state.bootstrap

    def down(self, timeout: float = 30.0) -> bool:
        """Stop every node (SIGTERM, wait, then SIGKILL); True when something was running."""
        if not self._state_file.exists():
            return False
        stopped = False
        for node in self._load_state().nodes:
            stopped = self.stop_node(node.node_id, timeout=timeout) or stopped
        return stopped

    def stop_node(self, node_id: int, *, kill: bool = False, timeout: float = 30.0) -> bool:
        """Stop one node; with kill=True send SIGKILL at once, as a crash would."""
        node = self._node(node_id)
        pid = self._running_pid(node)
        if pid is not None:
            os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
            if not _wait_exit(pid, timeout):
                os.kill(pid, signal.SIGKILL)
                _wait_exit(pid, 10.0)
        self._pid_file(node).unlink(missing_ok=True)
        self._children.pop(node_id, None)
        return pid is not None

    def start_node(self, node_id: int, timeout: float = 90.0) -> None:
        """Start one stopped node again and wait until the cluster serves."""
        java = require_executable("java", "a Java 17+ runtime is needed to run Kafka")
        state = self._load_state()
        node = self._node(node_id)
        if self._running_pid(node) is None:
            self._start_node(java, fetch_kafka_jars(), state, node)
        self._wait_ready(state, timeout)

    def log_file(self, node_id: int = 1) -> Path:
        """The log file of one node."""
        return self._node_dir(node_id) / "broker.log"

    # -- state --------------------------------------------------------------------------------
    @property
    def _state_file(self) -> Path:
        return self.directory / "cluster.json"

    def _load_state(self) -> _ClusterState:
        if not self._state_file.exists():
            raise BrokerError(f"no local Kafka was set up in {self.directory}")
        raw = json.loads(self._state_file.read_text())
        nodes = [_Node(**n) for n in raw.pop("nodes")]
        return _ClusterState(nodes=nodes, **raw)

    def _save_state(self, state: _ClusterState) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._state_file.write_text(json.dumps(asdict(state), indent=2))

    def _prepare_state(self, port: int | None, brokers: int) -> _ClusterState:
        if self._state_file.exists():
            state = self._load_state()
            if len(state.nodes) != brokers:
                raise BrokerError(
                    f"{self.directory} holds a {len(state.nodes)}-node cluster, not {brokers}"
                )
            if not any(self._running_pid(n) for n in state.nodes):
                self._repick_ports(state, port)
            return state
        ports = free_ports(2 * brokers)
        ports[0] = 9092 if port is None else port or ports[0]
        if not _port_is_free(ports[0]):
            raise BrokerError(f"port {ports[0]} on 127.0.0.1 is already in use")
        nodes = [_Node(i + 1, ports[2 * i], ports[2 * i + 1]) for i in range(brokers)]
        state = _ClusterState(cluster_id=_cluster_id(), nodes=nodes)
        self._save_state(state)
        return state

    def _repick_ports(self, state: _ClusterState, port: int | None) -> None:
        """Honour a new --port for a stopped cluster; --port 0 moves off a taken port."""
        first = state.nodes[0]
        if port == 0 and not _port_is_free(first.port):
            first.port = free_port()
        elif port not in (None, 0):
            first.port = port
        self._save_state(state)

    def _node(self, node_id: int) -> _Node:
        for node in self._load_state().nodes:
            if node.node_id == node_id:
                return node
        raise BrokerError(f"no node {node_id} in {self.directory}")

    def _node_dir(self, node_id: int) -> Path:
        return self.directory / f"node-{node_id}"

    def _pid_file(self, node: _Node) -> Path:
        return self._node_dir(node.node_id) / "broker.pid"

    def _running_pid(self, node: _Node) -> int | None:
        pid_file = self._pid_file(node)
        if not pid_file.exists():
            return None
        pid = int(pid_file.read_text().strip() or 0)
        if pid and _is_kafka_process(pid):
            return pid
        pid_file.unlink(missing_ok=True)
        return None

    # -- processes ----------------------------------------------------------------------------
    def _start_node(self, java: str, libs: Path, state: _ClusterState, node: _Node) -> None:
        for port in (node.port, node.controller_port):
            if not _port_is_free(port):
                raise BrokerError(f"port {port} on 127.0.0.1 is already in use")
        node_dir = self._node_dir(node.node_id)
        node_dir.mkdir(parents=True, exist_ok=True)
        properties = node_dir / "server.properties"
        properties.write_text(_server_properties(state, node, node_dir / "data"))
        log4j = node_dir / "log4j2.properties"
        log4j.write_text(_LOG4J.format(log=node_dir / "broker.log"))
        classpath = ["-cp", f"{libs}/*", f"-Dlog4j2.configurationFile={log4j}"]
        if not (node_dir / "data" / "meta.properties").exists():
            self._format_storage(java, classpath, state, properties)
        console = (node_dir / "console.log").open("ab")
        process = subprocess.Popen(
            [java, *_HEAP, *classpath, "kafka.Kafka", str(properties)],
            stdin=subprocess.DEVNULL,
            stdout=console,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        console.close()
        self._children[node.node_id] = process
        self._pid_file(node).write_text(str(process.pid))

    def _format_storage(
        self, java: str, classpath: list[str], state: _ClusterState, properties: Path
    ) -> None:
        command = [java, *_HEAP, *classpath, "kafka.tools.StorageTool", "format"]
        # The = form, since a generated cluster id may begin with "-".
        command += [f"--cluster-id={state.cluster_id}", "-c", str(properties), "--ignore-formatted"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            raise BrokerError(f"formatting Kafka storage failed: {last[0]}")

    def _wait_ready(self, state: _ClusterState, timeout: float) -> None:
        admin = AdminClient({"bootstrap.servers": state.bootstrap, "log_level": 0})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in state.nodes:
                self._check_alive(node)
            try:
                metadata = admin.list_topics(timeout=2)
            except KafkaException:
                continue
            if len(metadata.brokers) == len(state.nodes):
                return
            time.sleep(0.2)
        raise BrokerError(f"Kafka did not come up within {timeout:.0f}s; see {self.log_file()}")

    def _check_alive(self, node: _Node) -> None:
        """Raise if a node this object started (or found running) has exited."""
        child = self._children.get(node.node_id)
        code = child.poll() if child is not None else None
        if code is None and (child is not None or self._running_pid(node) is not None):
            return
        self._pid_file(node).unlink(missing_ok=True)
        status = f" with exit code {code}" if code is not None else ""
        raise BrokerError(
            f"Kafka node {node.node_id} exited during start-up{status}; "
            f"see {self.log_file(node.node_id)}"
        )


def _server_properties(state: _ClusterState, node: _Node, data: Path) -> str:
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in state.nodes)
    replicas = min(3, len(state.nodes))
    settings = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        # Static voters (not a dynamic quorum) so a restart may reuse the data directory.
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:"
        f"{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": data,
        "num.partitions": 1,
        "auto.create.topics.enable": "false",
        # A single node cannot host replicated internal topics: groups and transactions would
        # never start with the defaults of 3.
        "offsets.topic.replication.factor": replicas,
        "offsets.topic.num.partitions": 10,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min(2, replicas),
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min(2, replicas),
        "group.initial.rebalance.delay.ms": 0,
        # Compaction only runs on closed segments after the cleaner's back-off; short enough
        # that tests can watch it happen.
        "log.cleaner.backoff.ms": 1000,
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _is_kafka_process(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    # The java launcher may re-exec itself while starting; its cmdline is empty meanwhile.
    return (not cmdline or b"kafka.Kafka" in cmdline) and not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def _wait_exit(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not _is_kafka_process(pid):
            return True
        time.sleep(0.1)
    return False


def _reap(pid: int) -> None:
    # A node started by this very process stays a zombie until waited for.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
