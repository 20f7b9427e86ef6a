"""Which partitions an instance keeps warm: a ring of the group's members, read from the group.

The group's assignor (cooperative-sticky) decides who serves what; the standbys follow it. The
members, sorted by name (the instance id with static membership, else the member id), form a
ring; each member's partitions are kept warm by the `replicas` members after it. With two
instances and one replica each keeps the other's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import ConsumerGroupState, KafkaException
from confluent_kafka.admin import AdminClient

__all__ = ["GroupView", "describe_group", "standby_partitions"]

_DESCRIBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class GroupView:
    """A stable group's members: each one's name and results partitions, by member id."""

    names: Mapping[str, str]  # member id -> name
    partitions: Mapping[str, frozenset[int]]  # name -> its assigned results partitions


def standby_partitions(
    assignment: Mapping[str, frozenset[int]], me: str, replicas: int
) -> dict[int, str]:
    """The partitions `me` keeps warm, each with its owner's name: those of the `replicas`
    members before it in the ring of members sorted by name, none of its own."""
    members = sorted(assignment)
    if me not in members or replicas <= 0:
        return {}
    index, mine = members.index(me), assignment[me]
    wanted: dict[int, str] = {}
    for step in range(1, min(replicas, len(members) - 1) + 1):
        owner = members[(index - step) % len(members)]
        wanted.update((p, owner) for p in sorted(assignment[owner]) if p not in mine)
    return wanted


def describe_group(admin: AdminClient, group: str, topic: str) -> GroupView | None:
    """The group's members and their partitions of `topic`; None while it rebalances (an
    assignment half done names partitions no one holds) or if the broker did not answer."""
    try:
        futures = admin.describe_consumer_groups([group], request_timeout=_DESCRIBE_TIMEOUT_S)
        found = futures[group].result(_DESCRIBE_TIMEOUT_S * 2)
    except KafkaException:
        return None
    if found.state != ConsumerGroupState.STABLE:
        return None
    names: dict[str, str] = {}
    partitions: dict[str, frozenset[int]] = {}
    for member in found.members:
        name = member.group_instance_id or member.member_id
        names[member.member_id] = name
        held = member.assignment.topic_partitions if member.assignment else []
        partitions[name] = frozenset(tp.partition for tp in held if tp.topic == topic)
    return GroupView(names, partitions)
