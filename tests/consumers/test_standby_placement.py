"""Which partitions each aggregator instance keeps warm: a ring of the group's members."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from resultlog.consumers.aggregator.standby import standby_partitions

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
