"""Least-privilege roles as Kafka ACLs: what a worker, the aggregator and a viewer may do.

Topic and group names come from the settings, so a role follows a deployment's names. Every
role may DESCRIBE the groups named `resultlog-reader-*`: the assign()-only reader (resume,
replay, status) commits nothing but still looks up its random group's coordinator, and a
denied lookup would be an error. Nothing here grants cluster operations: creating topics,
purging a run and changing ACLs stay with an admin (a super user).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from resultlog._topic_table import TOPICS, Role
from resultlog.errors import KafkaClientError

# The Kafka client is imported by the functions that call Kafka: `resultlog acl --help` (and
# every other command, which builds the same parser) needs only the roles.
if TYPE_CHECKING:
    from confluent_kafka.admin import AclBinding, AclBindingFilter

    from resultlog.kafka import KafkaConnection
    from resultlog.settings import Settings

__all__ = ["READER_GROUP_PREFIX", "Acl", "Role", "grant", "list_acls", "revoke", "role_acls"]

# The group id prefix of KafkaConnection.reader().
READER_GROUP_PREFIX = "resultlog-reader-"
_TIMEOUT_S = 15.0
_MAX_TEXT = 200

Resource = Literal["topic", "group"]
Operation = Literal["READ", "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS"]


@dataclass(frozen=True, order=True)
class Acl:
    """One ALLOW rule: a principal may do an operation on a topic or group (or a prefix)."""

    principal: str
    resource: Resource
    name: str
    operation: Operation
    prefixed: bool = False

    def __str__(self) -> str:
        name = f"{self.name}* (prefix)" if self.prefixed else self.name
        return f"{self.principal} may {self.operation} {self.resource} {name}"


def role_acls(
    settings: Settings, role: Role, principal: str, group: str | None = None
) -> list[Acl]:
    """The ACLs of `role` for `principal`; `group` replaces the role's group from settings.

    Each topic's operations come from `TOPICS`. A role may also read the configuration of
    every checked topic it uses: a client checks their cleanup.policy, and a writer sizes its
    records by max.message.bytes, which it would otherwise have to guess.
    """
    principal = _checked_principal(principal)
    used = [(topic, topic.roles[role]) for topic in TOPICS if role in topic.roles]
    acls = [
        Acl(principal, "topic", topic.name(settings), operation)
        for topic, operations in used
        for operation in operations
    ]
    own_group = _GROUPS.get(role)
    if own_group is not None:
        acls.append(Acl(principal, "group", group or getattr(settings, own_group), "READ"))
    acls.append(Acl(principal, "group", READER_GROUP_PREFIX, "DESCRIBE", prefixed=True))
    acls.extend(
        Acl(principal, "topic", topic.name(settings), "DESCRIBE_CONFIGS")
        for topic, _ in used
        if topic.checked
    )
    return acls


# The consumer group a role's members join (the Settings field naming it): workers take work
# tasks, the aggregator folds results; a viewer only reads, with reader groups.
_GROUPS = {Role.WORKER: "work_group", Role.AGGREGATOR: "aggregator_group"}


def grant(kafka: KafkaConnection, acls: Sequence[Acl]) -> None:
    """Create the ACLs (creating an existing one again changes nothing)."""
    admin = kafka.admin()  # referenced until the futures are done: they fail once it is freed
    futures = admin.create_acls([_binding(acl) for acl in acls], request_timeout=_TIMEOUT_S)
    for future in futures.values():
        _result(kafka, future, "ALTER")


def revoke(kafka: KafkaConnection, acls: Sequence[Acl]) -> int:
    """Delete the ACLs; return how many existed."""
    filters = [_filter(acl) for acl in acls]
    admin = kafka.admin()
    futures = admin.delete_acls(filters, request_timeout=_TIMEOUT_S)
    return sum(len(_result(kafka, future, "ALTER")) for future in futures.values())


def list_acls(kafka: KafkaConnection, principal: str | None = None) -> list[Acl]:
    """Every ALLOW ACL on topics and groups (of `principal`, if given), sorted."""
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    if principal is not None:
        principal = _checked_principal(principal)
    anything: Any = None  # the filter's wildcard, which the type stubs do not allow for
    query = AclBindingFilter(
        ResourceType.ANY,
        anything,
        ResourcePatternType.ANY,
        principal or anything,
        anything,
        AclOperation.ANY,
        AclPermissionType.ALLOW,
    )
    admin = kafka.admin()
    future = admin.describe_acls(query, request_timeout=_TIMEOUT_S)
    bindings: list[AclBinding] = _result(kafka, future, "DESCRIBE")
    return sorted(acl for acl in map(_acl, bindings) if acl is not None)


def _checked_principal(principal: str) -> str:
    kind, _, name = principal.partition(":")
    if kind != "User" or not name or not name.isprintable() or name != name.strip():
        raise KafkaClientError(f"principal must look like User:NAME, got {principal!r}")
    return principal


def _binding(acl: Acl) -> AclBinding:
    from confluent_kafka.admin import AclBinding

    return AclBinding(*_fields(acl))


def _filter(acl: Acl) -> AclBindingFilter:
    from confluent_kafka.admin import AclBindingFilter

    return AclBindingFilter(*_fields(acl))


def _fields(acl: Acl) -> tuple[Any, ...]:
    from confluent_kafka.admin import (
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    kind = ResourceType.TOPIC if acl.resource == "topic" else ResourceType.GROUP
    pattern = ResourcePatternType.PREFIXED if acl.prefixed else ResourcePatternType.LITERAL
    operation = AclOperation[acl.operation]
    return kind, acl.name, pattern, acl.principal, "*", operation, AclPermissionType.ALLOW


def _acl(binding: AclBinding) -> Acl | None:
    """Our view of a binding; None for what roles never grant (cluster ACLs, DENY, hosts)."""
    from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType

    kinds: dict[Any, Resource] = {ResourceType.TOPIC: "topic", ResourceType.GROUP: "group"}
    operations: dict[Any, Operation] = {
        AclOperation.READ: "READ",
        AclOperation.WRITE: "WRITE",
        AclOperation.DESCRIBE: "DESCRIBE",
        AclOperation.DESCRIBE_CONFIGS: "DESCRIBE_CONFIGS",
    }
    kind, operation = kinds.get(binding.restype), operations.get(binding.operation)
    if kind is None or operation is None:
        return None
    prefixed = binding.resource_pattern_type == ResourcePatternType.PREFIXED
    return Acl(binding.principal, kind, binding.name, operation, prefixed)


def _result(kafka: KafkaConnection, future: concurrent.futures.Future[Any], operation: str) -> Any:
    """A future's result; Kafka's refusal as one line (never its Java request dump)."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        return future.result(timeout=_TIMEOUT_S + 5)
    except concurrent.futures.TimeoutError:
        raise KafkaClientError(f"no answer from Kafka at {kafka.servers} about ACLs") from None
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        if error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
            raise KafkaClientError(
                f"Kafka denied {kafka.settings.principal()} {operation} on the cluster "
                f"({error.name()}): only a super user may manage ACLs"
            ) from exc
        if error.code() == KafkaError.SECURITY_DISABLED:
            raise KafkaClientError(
                f"Kafka at {kafka.servers} runs no authorizer: start it with "
                "`resultlog kafka up --authorizer` (or set authorizer.class.name)"
            ) from exc
        text = str(error.str()).splitlines()[0][:_MAX_TEXT]
        raise KafkaClientError(f"Kafka refused the ACL request ({error.name()}): {text}") from exc
