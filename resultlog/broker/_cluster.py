"""LocalKafka: start, stop and restart the nodes of a local KRaft cluster kept in one directory."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from resultlog.broker._config import HEAP, admin_config, log4j_properties, server_properties
from resultlog.broker._jars import fetch_kafka_jars
from resultlog.broker._java import find_java
from resultlog.broker._processes import (
    free_port,
    free_ports,
    is_kafka_process,
    port_is_free,
    tied,
    wait_exit,
    wait_ports_free,
)
from resultlog.broker._scram import SCRAM_ITERATIONS, checked_users, scram_arguments
from resultlog.broker._security import Security
from resultlog.broker._state import (
    ClusterState,
    Node,
    default_kafka_dir,
    new_cluster_id,
    read_state,
    write_private,
    write_state,
)
from resultlog.broker._tls import TlsFiles, ensure_tls_files, issue_client_certificate, tls_paths
from resultlog.errors import BrokerError

__all__ = ["LocalKafka"]

_NO_SECURITY = Security()


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
        tls: bool = False,
        client_auth: bool = False,
        authorizer: bool = False,
        admin: str | None = None,
        tied: bool = False,
    ) -> str:
        """Start the cluster unless it already runs; wait until it serves; return bootstrap.

        `sasl_users` (name to password) makes the client listener SASL with SCRAM-SHA-512;
        the credentials are written at format time, or upserted through the admin API when
        the cluster already exists. `tls`: the listener speaks TLS with a certificate of the
        cluster's own CA (`ca.pem` in the directory); `client_auth`: clients must present a
        certificate of that CA (see `issue_certificate`). `authorizer`: Kafka's
        StandardAuthorizer, whose super user `admin` defaults to the one SASL user, else to
        `admin` (a certificate principal, whose certificate is issued at creation). These
        options are fixed when the cluster is created. `tied`: the nodes started now get
        SIGTERM when this process dies, however it dies (`resultlog up`'s broker).
        """
        java = find_java()
        users = checked_users(sasl_users)
        wanted = Security(bool(users), tls, client_auth, authorizer)
        wanted.check()
        existed = self._state_file.exists()
        state = self._prepare_state(port, brokers, users, wanted, admin)
        if not all(self._running_pid(n) for n in state.nodes):
            libs = fetch_kafka_jars()
            tls_files = self._ensure_tls(state)
            if not existed and state.admin is not None and not state.sasl:
                self.issue_certificate(state.admin)
            scram = scram_arguments(users, state.internal_secret if state.sasl else None)
            for node in state.nodes:
                if self._running_pid(node) is None:
                    self._start_node(java, libs, state, node, scram, tls=tls_files, tie=tied)
            self._wait_ready(state, timeout)
        if existed and users:
            self._upsert_users(state, users)
        return state.bootstrap

    def running(self) -> bool:
        """Whether any node of the cluster in this directory runs now."""
        if not self._state_file.exists():
            return False
        return any(self._running_pid(node) for node in self._load_state().nodes)

    def issue_certificate(self, principal: str, out: Path | None = None) -> tuple[Path, Path]:
        """A client certificate for User:NAME from the cluster's CA: (certificate, key) paths.

        Written to `out` (default: `clients/` in the cluster directory); the key is mode 0600.
        """
        return issue_client_certificate(self.directory, principal, out)

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
        java = find_java()
        state = self._load_state()
        node = self._node(node_id)
        if self._running_pid(node) is None:
            tls_files = self._ensure_tls(state)
            self._start_node(java, fetch_kafka_jars(), state, node, [], tls=tls_files)
        self._wait_ready(state, timeout)

    def log_file(self, node_id: int = 1) -> Path:
        """The log file of one node."""
        return self._node_dir(node_id) / "broker.log"

    def _await_stop(self, node: Node, pid: int | None, timeout: float) -> None:
        """Wait for a signalled node to exit (SIGKILL after `timeout`); forget its pid."""
        if pid is not None and not wait_exit(pid, timeout):
            os.kill(pid, signal.SIGKILL)
            wait_exit(pid, 10.0)
        # The main thread may be a zombie while other threads still hold the listeners.
        wait_ports_free((node.port, node.controller_port), 10.0)
        self._pid_file(node).unlink(missing_ok=True)
        self._children.pop(node.node_id, None)

    def _upsert_users(self, state: ClusterState, users: Mapping[str, str]) -> None:
        """Create or update SCRAM users of a running cluster through the admin API."""
        admin = AdminClient(admin_config(state, state.bootstrap, self._tls_paths(state)))
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

    def _load_state(self) -> ClusterState:
        if not self._state_file.exists():
            raise BrokerError(f"no local Kafka was set up in {self.directory}")
        return read_state(self._state_file)

    def _save_state(self, state: ClusterState) -> None:
        write_state(self._state_file, state)

    def _prepare_state(
        self,
        port: int | None,
        brokers: int,
        users: Mapping[str, str],
        security: Security = _NO_SECURITY,
        admin: str | None = None,
    ) -> ClusterState:
        if self._state_file.exists():
            state = self._load_state()
            if len(state.nodes) != brokers:
                raise BrokerError(
                    f"{self.directory} holds a {len(state.nodes)}-node cluster, not {brokers}"
                )
            if Security.of(state) != security:
                raise BrokerError(
                    f"{self.directory} holds {Security.of(state).describe()}, not "
                    f"{security.describe()}; use the same options or another --dir"
                )
            if admin is not None and admin != state.admin:
                raise BrokerError(f"the admin of {self.directory} is {state.admin}, not {admin}")
            if not any(self._running_pid(n) for n in state.nodes):
                self._repick_ports(state, port)
            elif port and port != state.nodes[0].port:
                raise BrokerError(
                    f"the cluster of {self.directory} already runs on port "
                    f"{state.nodes[0].port}, not {port}: `kafka down` first to move it"
                )
            return state
        ports = free_ports(2 * brokers)
        ports[0] = 9092 if port is None else port or ports[0]
        if not port_is_free(ports[0]):
            raise BrokerError(
                f"port {ports[0]} on 127.0.0.1 is already in use (--port 0 picks a free one)"
            )
        nodes = [Node(i + 1, ports[2 * i], ports[2 * i + 1]) for i in range(brokers)]
        state = ClusterState(
            cluster_id=new_cluster_id(),
            nodes=nodes,
            sasl_users=sorted(users),
            sasl=security.sasl,
            tls=security.tls,
            client_auth=security.client_auth,
            admin=security.admin(users, admin),
        )
        if security.sasl or security.authorizer:
            state.internal_secret = secrets.token_urlsafe(32)
        self._save_state(state)
        return state

    def _ensure_tls(self, state: ClusterState) -> TlsFiles | None:
        """The CA and a valid broker certificate of a TLS cluster (made or renewed now)."""
        return ensure_tls_files(self.directory) if state.tls else None

    def _tls_paths(self, state: ClusterState) -> TlsFiles | None:
        return tls_paths(self.directory) if state.tls else None

    def _repick_ports(self, state: ClusterState, port: int | None) -> None:
        """Honour a new --port for a stopped cluster: 0 picks a free port now, None keeps it."""
        first = state.nodes[0]
        if port == 0:
            first.port = free_port()
        elif port is not None:
            first.port = port
        self._save_state(state)

    def _node(self, node_id: int) -> Node:
        for node in self._load_state().nodes:
            if node.node_id == node_id:
                return node
        raise BrokerError(f"no node {node_id} in {self.directory}")

    def _node_dir(self, node_id: int) -> Path:
        return self.directory / f"node-{node_id}"

    def _pid_file(self, node: Node) -> Path:
        return self._node_dir(node.node_id) / "broker.pid"

    def _running_pid(self, node: Node) -> int | None:
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
        self,
        java: str,
        libs: Path,
        state: ClusterState,
        node: Node,
        scram: list[str],
        *,
        tls: TlsFiles | None,
        tie: bool = False,
    ) -> None:
        for port in (node.port, node.controller_port):
            if not port_is_free(port):
                raise BrokerError(f"port {port} on 127.0.0.1 is already in use")
        node_dir = self._node_dir(node.node_id)
        node_dir.mkdir(parents=True, exist_ok=True)
        properties = node_dir / "server.properties"
        write_private(properties, server_properties(state, node, node_dir / "data", tls))
        log4j = node_dir / "log4j2.properties"
        log4j.write_text(log4j_properties(node_dir / "broker.log"))
        classpath = ["-cp", f"{libs}/*", f"-Dlog4j2.configurationFile={log4j}"]
        if not (node_dir / "data" / "meta.properties").exists():
            self._format_storage(java, classpath, state, properties, scram)
        console = (node_dir / "console.log").open("ab")
        command = [java, *HEAP, *classpath, "kafka.Kafka", str(properties)]
        process = subprocess.Popen(
            tied(command) if tie else command,
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
        state: ClusterState,
        properties: Path,
        scram: list[str],
    ) -> None:
        command = [java, *HEAP, *classpath, "kafka.tools.StorageTool", "format"]
        # The = form, since a generated cluster id may begin with "-".
        command += [f"--cluster-id={state.cluster_id}", "-c", str(properties), "--ignore-formatted"]
        command += [f"--add-scram={credential}" for credential in scram]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            raise BrokerError(f"formatting Kafka storage failed: {last[0]}")

    def _wait_ready(self, state: ClusterState, timeout: float) -> None:
        """Wait until every node answers on its own port and knows every other node."""
        # Asking each node itself: the cluster's metadata still lists a node killed moments
        # ago, while the node only opens its client port once it has caught up.
        tls = self._tls_paths(state)
        admins = {n.node_id: AdminClient(admin_config(state, n.address, tls)) for n in state.nodes}
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

    def _check_alive(self, node: Node) -> None:
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


def _serves(admin: AdminClient, nodes: int) -> bool:
    """Whether a node knows every node and a leader for every partition."""
    try:
        metadata = admin.list_topics(timeout=2)
    except KafkaException:
        return False
    partitions = [p for topic in metadata.topics.values() for p in topic.partitions.values()]
    return len(metadata.brokers) == nodes and all(p.leader >= 0 for p in partitions)
