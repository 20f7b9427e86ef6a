"""A local Apache Kafka cluster (KRaft, combined broker+controller nodes) run from Maven jars.

With `sasl_users` the client listener is SASL_PLAINTEXT with SCRAM-SHA-512 (the controller
listener stays PLAINTEXT on loopback); the brokers authenticate to each other as an internal
user whose random password lives only in the cluster directory (files of mode 0600).
"""

from resultlog.broker._cluster import LocalKafka
from resultlog.broker._jars import KAFKA_VERSION, fetch_maven_artifacts, user_cache_dir
from resultlog.broker._processes import free_port, free_ports
from resultlog.broker._scram import SCRAM_MECHANISM, sasl_users_from_env
from resultlog.broker._state import default_kafka_dir

__all__ = [
    "KAFKA_VERSION",
    "SCRAM_MECHANISM",
    "LocalKafka",
    "default_kafka_dir",
    "fetch_maven_artifacts",
    "free_port",
    "free_ports",
    "sasl_users_from_env",
    "user_cache_dir",
]
