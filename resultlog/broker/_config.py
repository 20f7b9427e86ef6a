"""Configuration of a local node (server.properties, log4j2, heap) and of the launcher's admin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from resultlog.broker._scram import INTERNAL_USER, SCRAM_MECHANISM, sasl_properties
from resultlog.broker._state import ClusterState, Node

__all__ = ["HEAP", "admin_config", "log4j_properties", "server_properties"]

HEAP = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC"]
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


def log4j_properties(log: Path) -> str:
    """A log4j2 configuration writing to `log`, quiet below WARN for Kafka's own loggers."""
    return _LOG4J.format(log=log)


def server_properties(state: ClusterState, node: Node, data: Path) -> str:
    """The server.properties of one node, its log directory `data`."""
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


def admin_config(state: ClusterState, servers: str) -> dict[str, Any]:
    """The launcher's own client configuration (the internal user on a SASL cluster)."""
    config: dict[str, Any] = {"bootstrap.servers": servers, "log_level": 0}
    if state.internal_secret is not None:
        config["security.protocol"] = "SASL_PLAINTEXT"
        config["sasl.mechanism"] = SCRAM_MECHANISM
        config["sasl.username"] = INTERNAL_USER
        config["sasl.password"] = state.internal_secret
    return config
