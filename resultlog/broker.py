"""A local Apache Kafka cluster (KRaft, combined broker+controller nodes) run from Maven jars.

With `sasl_users` the client listener is SASL_PLAINTEXT with SCRAM-SHA-512 (the controller
listener stays PLAINTEXT on loopback); the brokers authenticate to each other as an internal
user whose random password lives only in the cluster directory (files of mode 0600).
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from resultlog._jars import KAFKA_VERSION, fetch_kafka_jars, require_executable
from resultlog._processes import (
    free_port,
    free_ports,
    is_kafka_process,
    port_is_free,
    wait_exit,
    wait_ports_free,
)
from resultlog._scram import (
    INTERNAL_USER,
    SCRAM_ITERATIONS,
    SCRAM_MECHANISM,
    checked_users,
    sasl_properties,
    sasl_users_from_env,
    scram_arguments,
)
from resultlog.errors import BrokerError

__all__ = [
    "SCRAM_MECHANISM",
    "LocalKafka",
    "default_kafka_dir",
    "free_port",
    "free_ports",
    "sasl_users_from_env",
]

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
    sasl_users: list[str] = field(default_factory=list)  # names only, never passwords
    # The brokers' own SCRAM password; None for a PLAINTEXT cluster.
    internal_secret: str | None = field(default=None, repr=False)

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

    def up(
        self,
        port: int | None = None,
        brokers: int = 1,
        timeout: float = 90.0,
        *,
        sasl_users: Mapping[str, str] | None = None,
    ) -> str:
        """Start the cluster unless it already runs; wait until it serves; return bootstrap.

        `sasl_users` (name to password) makes the client listener SASL_PLAINTEXT with
        SCRAM-SHA-512; the credentials are written at format time, or upserted through the
        admin API when the cluster already exists.
        """
        java = require_executable("java", "a Java 17+ runtime is needed to run Kafka")
        users = checked_users(sasl_users)
        existed = self._state_file.exists()
        state = self._prepare_state(port, brokers, users)
        if not all(self._running_pid(n) for n in state.nodes):
            libs = fetch_kafka_jars()
            scram = scram_arguments(users, state.internal_secret)
            for node in state.nodes:
                if self._running_pid(node) is None:
                    self._start_node(java, libs, state, node, scram)
            self._wait_ready(state, timeout)
        if existed and users:
            self._upsert_users(state, users)
        return state.bootstrap

    def down(self, timeout: float = 30.0) -> bool:
        """Stop every node (SIGTERM, wait, then SIGKILL); True when something was running."""
        if not self._state_file.exists():
            return False
        nodes = self._load_state().nodes
        # Signal every node first: stopped one by one, the last ones lose their quorum and
        # wait out their controlled shutdown.
        pids = {node.node_id: self._running_pid(node) for node in nodes}
        for pid in pids.values():
            if pid is not None:
                os.kill(pid, signal.SIGTERM)
        for node in nodes:
            self._await_stop(node, pids[node.node_id], timeout)
        return any(pid is not None for pid in pids.values())

    def stop_node(self, node_id: int, *, kill: bool = False, timeout: float = 30.0) -> bool:
        """Stop one node; with kill=True send SIGKILL at once, as a crash would."""
        node = self._node(node_id)
        pid = self._running_pid(node)
        if pid is not None:
            os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
        self._await_stop(node, pid, timeout)
        return pid is not None

    def start_node(self, node_id: int, timeout: float = 90.0) -> None:
        """Start one stopped node again and wait until the cluster serves."""
        java = require_executable("java", "a Java 17+ runtime is needed to run Kafka")
        state = self._load_state()
        node = self._node(node_id)
        if self._running_pid(node) is None:
            self._start_node(java, fetch_kafka_jars(), state, node, [])
        self._wait_ready(state, timeout)

    def log_file(self, node_id: int = 1) -> Path:
        """The log file of one node."""
        return self._node_dir(node_id) / "broker.log"

    def _await_stop(self, node: _Node, pid: int | None, timeout: float) -> None:
        """Wait for a signalled node to exit (SIGKILL after `timeout`); forget its pid."""
        if pid is not None and not wait_exit(pid, timeout):
            os.kill(pid, signal.SIGKILL)
            wait_exit(pid, 10.0)
        # The main thread may be a zombie while other threads still hold the listeners.
        wait_ports_free((node.port, node.controller_port), 10.0)
        self._pid_file(node).unlink(missing_ok=True)
        self._children.pop(node.node_id, None)

    def _upsert_users(self, state: _ClusterState, users: Mapping[str, str]) -> None:
        """Create or update SCRAM users of a running cluster through the admin API."""
        admin = AdminClient(_admin_config(state, state.bootstrap))
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
        upserts: list[UserScramCredentialAlteration] = [
            UserScramCredentialUpsertion(name, info, password.encode("utf-8"))
            for name, password in users.items()
        ]
        for name, future in admin.alter_user_scram_credentials(upserts).items():
            try:
                future.result()
            except KafkaException as exc:
                raise BrokerError(f"cannot set the SCRAM credentials of {name}: {exc}") from exc
        state.sasl_users = sorted({*state.sasl_users, *users})
        self._save_state(state)

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
        _write_private(self._state_file, json.dumps(asdict(state), indent=2))

    def _prepare_state(
        self, port: int | None, brokers: int, users: Mapping[str, str]
    ) -> _ClusterState:
        if self._state_file.exists():
            state = self._load_state()
            if len(state.nodes) != brokers:
                raise BrokerError(
                    f"{self.directory} holds a {len(state.nodes)}-node cluster, not {brokers}"
                )
            if bool(users) != (state.internal_secret is not None):
                kind = "a PLAINTEXT" if state.internal_secret is None else "a SASL"
                raise BrokerError(
                    f"{self.directory} holds {kind} cluster; use another --dir for the other kind"
                )
            if not any(self._running_pid(n) for n in state.nodes):
                self._repick_ports(state, port)
            return state
        ports = free_ports(2 * brokers)
        ports[0] = 9092 if port is None else port or ports[0]
        if not port_is_free(ports[0]):
            raise BrokerError(f"port {ports[0]} on 127.0.0.1 is already in use")
        nodes = [_Node(i + 1, ports[2 * i], ports[2 * i + 1]) for i in range(brokers)]
        state = _ClusterState(cluster_id=_cluster_id(), nodes=nodes, sasl_users=sorted(users))
        if users:
            state.internal_secret = secrets.token_urlsafe(32)
        self._save_state(state)
        return state

    def _repick_ports(self, state: _ClusterState, port: int | None) -> None:
        """Honour a new --port for a stopped cluster; --port 0 moves off a taken port."""
        first = state.nodes[0]
        if port == 0 and not port_is_free(first.port):
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
        if pid and is_kafka_process(pid):
            return pid
        pid_file.unlink(missing_ok=True)
        return None

    # -- processes ----------------------------------------------------------------------------
    def _start_node(
        self, java: str, libs: Path, state: _ClusterState, node: _Node, scram: list[str]
    ) -> None:
        for port in (node.port, node.controller_port):
            if not port_is_free(port):
                raise BrokerError(f"port {port} on 127.0.0.1 is already in use")
        node_dir = self._node_dir(node.node_id)
        node_dir.mkdir(parents=True, exist_ok=True)
        properties = node_dir / "server.properties"
        _write_private(properties, _server_properties(state, node, node_dir / "data"))
        log4j = node_dir / "log4j2.properties"
        log4j.write_text(_LOG4J.format(log=node_dir / "broker.log"))
        classpath = ["-cp", f"{libs}/*", f"-Dlog4j2.configurationFile={log4j}"]
        if not (node_dir / "data" / "meta.properties").exists():
            self._format_storage(java, classpath, state, properties, scram)
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
        self,
        java: str,
        classpath: list[str],
        state: _ClusterState,
        properties: Path,
        scram: list[str],
    ) -> None:
        command = [java, *_HEAP, *classpath, "kafka.tools.StorageTool", "format"]
        # The = form, since a generated cluster id may begin with "-".
        command += [f"--cluster-id={state.cluster_id}", "-c", str(properties), "--ignore-formatted"]
        command += [f"--add-scram={credential}" for credential in scram]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            raise BrokerError(f"formatting Kafka storage failed: {last[0]}")

    def _wait_ready(self, state: _ClusterState, timeout: float) -> None:
        """Wait until every node answers on its own port and knows every other node."""
        # Asking each node itself: the cluster's metadata still lists a node killed moments
        # ago, while the node only opens its client port once it has caught up.
        admins = {n.node_id: AdminClient(_admin_config(state, _address(n))) for n in state.nodes}
        waiting = [node.node_id for node in state.nodes]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in state.nodes:
                self._check_alive(node)
            waiting = [n for n in waiting if not _serves(admins[n], len(state.nodes))]
            if not waiting:
                return
            time.sleep(0.2)
        raise BrokerError(
            f"Kafka did not come up within {timeout:.0f}s; see {self.log_file(waiting[0])}"
        )

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
    listener = "PLAINTEXT" if state.internal_secret is None else "SASL_PLAINTEXT"
    settings: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        # Static voters (not a dynamic quorum) so a restart may reuse the data directory.
        "controller.quorum.voters": voters,
        "listeners": f"{listener}://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:"
        f"{node.controller_port}",
        "advertised.listeners": f"{listener}://127.0.0.1:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": listener,
        "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{listener}:{listener}",
        **sasl_properties(state.internal_secret),
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
        # A killed node is fenced (and its partitions get new leaders) after this session
        # timeout; the default 9 s would stall every producer of a local cluster that long.
        "broker.session.timeout.ms": 3000,
        "broker.heartbeat.interval.ms": 500,
        # Compaction only runs on closed segments after the cleaner's back-off; short enough
        # that tests can watch it happen.
        "log.cleaner.backoff.ms": 1000,
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def _admin_config(state: _ClusterState, servers: str) -> dict[str, Any]:
    """The launcher's own client configuration (the internal user on a SASL cluster)."""
    config: dict[str, Any] = {"bootstrap.servers": servers, "log_level": 0}
    if state.internal_secret is not None:
        config["security.protocol"] = "SASL_PLAINTEXT"
        config["sasl.mechanism"] = SCRAM_MECHANISM
        config["sasl.username"] = INTERNAL_USER
        config["sasl.password"] = state.internal_secret
    return config


def _address(node: _Node) -> str:
    return f"127.0.0.1:{node.port}"


def _serves(admin: AdminClient, nodes: int) -> bool:
    """Whether a node knows every node and a leader for every partition."""
    try:
        metadata = admin.list_topics(timeout=2)
    except KafkaException:
        return False
    partitions = [p for topic in metadata.topics.values() for p in topic.partitions.values()]
    return len(metadata.brokers) == nodes and all(p.leader >= 0 for p in partitions)


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read (it may hold the internal SASL password)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)
    os.chmod(path, 0o600)  # an existing file keeps its mode through O_CREAT


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
