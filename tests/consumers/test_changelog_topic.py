"""The changelog topic's writer on a real broker: a flush's records land in order, whole,
whatever the room in the producer's local queue, and flushes in flight are heard of apart."""

from __future__ import annotations

import pytest

from resultlog.consumers.aggregator.store import MARKER_KEY, KafkaChangelog, _changelog
from resultlog.consumers.aggregator.store._codec import FENCE, untag
from resultlog.kafka import KafkaConnection


def test_a_flush_larger_than_the_local_queue_lands_whole_and_in_order(
    kafka: KafkaConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = {**_changelog._PRODUCER, "queue.buffering.max.messages": 100}
    monkeypatch.setattr(_changelog, "_PRODUCER", small)
    changelog = KafkaChangelog(kafka)
    entries: list[tuple[bytes, bytes | None]] = [(b"k%05d" % i, b"v%d" % i) for i in range(1000)]
    entries[7] = (b"k00007", None)  # a tombstone among them
    end = changelog.write(0, entries, b"marker")  # its first write: after its fence
    read = [(record.key, untag(record.value)) for record in changelog.read(0, 0, end)]
    fence = FENCE + changelog.writer(0)
    changelog.close()
    assert end == 1002
    assert read == [(fence, b""), *entries, (MARKER_KEY, b"marker")]


def test_flushes_in_flight_are_acknowledged_each_with_its_own_offset(
    kafka: KafkaConnection,
) -> None:
    changelog = KafkaChangelog(kafka)
    assert changelog.fence(1) == 1
    first = changelog.send(1, [(b"a", b"1"), (b"b", b"1")], b"m1")
    second = changelog.send(1, [(b"a", b"2")], b"m2")
    assert second.wait() == 6
    assert first.done() and first.wait() == 4
    read = [(record.offset, record.key) for record in changelog.read(1, 1, 6)]
    changelog.close()
    assert read == [(1, b"a"), (2, b"b"), (3, MARKER_KEY), (4, b"a"), (5, MARKER_KEY)]
