"""What a local cluster's directory records: its id, nodes, ports and security set-up."""

from __future__ import annotations

import base64
import json
import os
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from resultlog.broker._jars import KAFKA_VERSION
from resultlog.broker._processes import is_kafka_process
from resultlog.errors import BrokerError

__all__ = [
    "ClusterState",
    "Node",
    "default_kafka_dir",
    "local_bootstrap",
    "new_cluster_id",
    "read_state",
    "write_private",
    "write_state",
]


def default_kafka_dir() -> Path:
    """Where `kafka up` keeps its data when no --dir is given."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "resultlog" / "kafka"


def local_bootstrap(directory: Path) -> str | None:
    """`127.0.0.1:PORT` of each running node of the plain-text cluster in `directory`, comma
    separated; None when none runs there (or it wants TLS or logins, which need settings).

    A contract with the TypeScript client (src/localStack.ts), documented on the local stack's
    page: it reads the same two files, `cluster.json` and each node's `broker.pid`.
    """
    try:
        raw = json.loads((directory / "cluster.json").read_text(encoding="utf-8"))
        if raw.get("sasl") is True or raw.get("tls") is True:
            return None
        nodes = [(int(node["node_id"]), int(node["port"])) for node in raw["nodes"]]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    running = [
        f"127.0.0.1:{port}"
        for node_id, port in nodes
        if is_kafka_process(_pid(directory / f"node-{node_id}" / "broker.pid"))
    ]
    return ",".join(running) or None


def _pid(path: Path) -> int:
    """The process id a pid file holds (0: none)."""
    try:
        return int(path.read_text(encoding="utf-8").strip() or 0)
    except (OSError, ValueError):
        return 0


@dataclass
class Node:
    """One combined broker+controller node and its two loopback ports."""

    node_id: int
    port: int
    controller_port: int

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


@dataclass
class ClusterState:
    """The cluster as configured, kept in cluster.json."""

    cluster_id: str
    nodes: list[Node] = field(default_factory=list)
    version: str = KAFKA_VERSION
    sasl_users: list[str] = field(default_factory=list)  # names only, never passwords
    # The brokers' own password (SCRAM between brokers, PLAIN to the controllers); None for a
    # cluster with neither SASL nor an authorizer.
    internal_secret: str | None = field(default=None, repr=False)
    sasl: bool = False  # SCRAM-SHA-512 logins on the client listener
    tls: bool = False  # the client listener speaks TLS
    client_auth: bool = False  # ... and requires a client certificate (mutual TLS)
    admin: str | None = None  # the super user's name: Kafka's StandardAuthorizer is on

    @property
    def bootstrap(self) -> str:
        return ",".join(node.address for node in self.nodes)

    @property
    def protocol(self) -> str:
        """The security protocol of the client (and inter-broker) listener."""
        if self.tls:
            return "SASL_SSL" if self.sasl else "SSL"
        return "SASL_PLAINTEXT" if self.sasl else "PLAINTEXT"


def read_state(path: Path) -> ClusterState:
    """The cluster state saved in `path`; one line naming the file when it is unusable."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        nodes = [Node(**n) for n in raw.pop("nodes")]
        # Written before the security fields existed: an internal secret meant SASL.
        raw.setdefault("sasl", raw.get("internal_secret") is not None)
        return ClusterState(nodes=nodes, **raw)
    except OSError as exc:
        raise BrokerError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise BrokerError(
            f"{path} is not a cluster state ({type(exc).__name__}: {exc}); if no broker of "
            f"that directory runs, remove the file and run `kafka up` again"
        ) from exc


def write_state(path: Path, state: ClusterState) -> None:
    """Save the cluster state to `path`, readable by its owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, json.dumps(asdict(state), indent=2))


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner may read (it may hold the internal SASL password).

    Atomically: a temporary file beside it, synced, then renamed over it, so a full disk or
    a crash leaves the old file or the new one, never a truncated one.
    """
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o600)  # an existing file keeps its mode through O_CREAT
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise BrokerError(f"cannot write {path}: {exc.strerror or exc}") from exc


def new_cluster_id() -> str:
    """A fresh KRaft cluster id (a base64url UUID without padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
