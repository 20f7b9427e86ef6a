"""Which partitions each aggregator instance keeps warm: a ring of the group's members, as a
child process describes the group."""

from __future__ import annotations

import os
import signal
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from resultlog.consumers.aggregator.standby import standby_partitions
from resultlog.consumers.aggregator.standby._describer import GroupDescriber
from resultlog.consumers.aggregator.standby._placement import GroupView
from resultlog.kafka import KafkaConnection
from resultlog.settings import Settings
from tests.support.waiting import wait_for

TWO = {"a": frozenset({0, 1, 2}), "b": frozenset({3, 4, 5})}
THREE = {"a": frozenset({0, 1}), "b": frozenset({2, 3}), "c": frozenset({4, 5})}


def test_with_two_instances_and_one_replica_each_keeps_the_others_partitions() -> None:
    assert standby_partitions(TWO, "a", 1) == {3: "b", 4: "b", 5: "b"}
    assert standby_partitions(TWO, "b", 1) == {0: "a", 1: "a", 2: "a"}


def test_a_members_partitions_are_kept_by_the_next_members_in_the_ring() -> None:
    assert standby_partitions(THREE, "a", 1) == {4: "c", 5: "c"}
    assert standby_partitions(THREE, "b", 1) == {0: "a", 1: "a"}
    assert standby_partitions(THREE, "c", 1) == {2: "b", 3: "b"}
    assert standby_partitions(THREE, "a", 2) == {2: "b", 3: "b", 4: "c", 5: "c"}


def test_more_replicas_than_other_members_keep_every_other_partition_once() -> None:
    assert standby_partitions(TWO, "a", 5) == {3: "b", 4: "b", 5: "b"}
    assert standby_partitions(THREE, "b", 9) == {0: "a", 1: "a", 4: "c", 5: "c"}


def test_nothing_is_kept_warm_without_replicas_alone_or_outside_the_group() -> None:
    assert standby_partitions(TWO, "a", 0) == {}
    assert standby_partitions({"a": frozenset({0, 1})}, "a", 1) == {}
    assert standby_partitions(TWO, "z", 1) == {}


def test_a_member_never_keeps_a_copy_of_its_own_partition() -> None:
    # Mid-handover two members may both name a partition: the one holding it keeps no copy.
    overlapping = {"a": frozenset({0, 1}), "b": frozenset({1, 2})}
    assert standby_partitions(overlapping, "a", 1) == {2: "b"}
    assert standby_partitions(overlapping, "b", 1) == {0: "a"}


@given(
    st.dictionaries(
        st.text("abcdef", min_size=1, max_size=3),
        st.frozensets(st.integers(0, 30), max_size=5),
        min_size=1,
        max_size=6,
    ),
    st.integers(1, 6),
)
def test_each_partition_has_min_of_replicas_and_other_members_copies(
    assignment: dict[str, frozenset[int]], replicas: int
) -> None:
    # Disjoint, as a stable group's assignment is: a partition goes to its first holder.
    seen: set[int] = set()
    disjoint = {}
    for name in sorted(assignment):
        disjoint[name] = assignment[name] - seen
        seen |= assignment[name]
    copies: Counter[int] = Counter()
    for member, held in disjoint.items():
        kept = standby_partitions(disjoint, member, replicas)
        assert not set(kept) & held
        assert all(p in disjoint[owner] for p, owner in kept.items())
        copies.update(kept.keys())
    want = min(replicas, len(disjoint) - 1)
    assert copies == Counter({p: want for p in seen if want})


def test_the_group_is_described_through_a_child_that_is_replaced_when_it_dies(
    settings: Settings,
) -> None:
    # librdkafka's admin client can abort its process on a timed-out coordinator request:
    # the keeper asks through a child, and a dead child is replaced at the next question.
    with KafkaConnection(settings) as kafka:
        member = kafka.group_consumer(
            settings.aggregator_group,
            {"group.instance.id": "member-a", "auto.offset.reset": "earliest"},
        )
        member.subscribe([settings.results_topic])
        describer = GroupDescriber(settings.client_config())
        try:

            def described() -> GroupView | None:
                member.poll(0.2)
                return describer.describe(settings.aggregator_group, settings.results_topic)

            view = wait_for(described, "a stable group of one member")
            assert set(view.partitions) == {"member-a"}
            assert view.partitions["member-a"] == frozenset(range(settings.partitions))
            child = describer._child
            assert child is not None
            os.kill(child.pid, signal.SIGABRT)
            child.wait(10)
            assert wait_for(described, "an answer from a new child") == view
            assert describer._child is not None and describer._child.pid != child.pid
        finally:
            describer.close()
            member.close()
    assert child.returncode == -signal.SIGABRT
