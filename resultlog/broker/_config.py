"""Configuration of a local node (server.properties, log4j2, heap) and of the launcher's admin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from resultlog.broker._scram import INTERNAL_USER, SCRAM_MECHANISM, sasl_properties
from resultlog.broker._state import ClusterState, Node
from resultlog.broker._tls import TlsFiles

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


def server_properties(state: ClusterState, node: Node, data: Path, tls: TlsFiles | None) -> str:
    """The server.properties of one node, its log directory `data`."""
    voters = ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in state.nodes)
    replicas = min(3, len(state.nodes))
    # The client listener is the inter-broker one too: with an authorizer, a listener of its
    # own without authentication would make every anonymous client a super user.
    listener = state.protocol
    controller = "PLAINTEXT" if state.admin is None else "SASL_PLAINTEXT"
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
        "listener.security.protocol.map": f"CONTROLLER:{controller},{listener}:{listener}",
        **_sasl(state, listener),
        **_tls(state, listener, tls),
        **_authorizer(state),
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


def _sasl(state: ClusterState, listener: str) -> dict[str, object]:
    if not state.sasl or state.internal_secret is None:
        return {}
    return sasl_properties(state.internal_secret, listener)


def _tls(state: ClusterState, listener: str, tls: TlsFiles | None) -> dict[str, object]:
    """PEM keystore and truststore (the brokers check each other too), mutual TLS if asked."""
    if not state.tls or tls is None:
        return {}
    settings: dict[str, object] = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": tls.keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": tls.ca,
        # Java prints a certificate's DN as RFC 2253 (last RDN first); a CN alone is User:<CN>.
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
    }
    if state.client_auth:
        # Listener-scoped: the broker-wide key would not apply to a SASL_SSL listener.
        settings[f"listener.name.{listener.lower()}.ssl.client.auth"] = "required"
    return settings


def _authorizer(state: ClusterState) -> dict[str, object]:
    """Kafka's StandardAuthorizer; the controllers authenticate the brokers with PLAIN.

    An unauthenticated controller listener would see each broker as User:ANONYMOUS, which
    may not register: the node gives up after a minute. SCRAM cannot serve there (its
    credentials live in the metadata log the controllers serve).
    """
    if state.admin is None or state.internal_secret is None:
        return {}
    secret = state.internal_secret
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="{INTERNAL_USER}" password="{secret}" user_{INTERNAL_USER}="{secret}";'
    )
    return {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{INTERNAL_USER};User:{state.admin}",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": jaas,
    }


def admin_config(state: ClusterState, servers: str, tls: TlsFiles | None) -> dict[str, Any]:
    """The launcher's own client configuration: the internal user (a super user)."""
    config: dict[str, Any] = {
        "bootstrap.servers": servers,
        "log_level": 0,
        "security.protocol": state.protocol,
    }
    if state.sasl and state.internal_secret is not None:
        config["sasl.mechanism"] = SCRAM_MECHANISM
        config["sasl.username"] = INTERNAL_USER
        config["sasl.password"] = state.internal_secret
    if state.tls and tls is not None:
        config["ssl.ca.location"] = str(tls.ca)
        if state.client_auth:  # the broker's certificate: its CN is the internal user
            config["ssl.certificate.location"] = str(tls.keystore)
            config["ssl.key.location"] = str(tls.keystore)
    return config
