"""The changelog topic's writer on a real broker: a flush's records land in order, whole,
whatever the room in the producer's local queue, and flushes in flight are heard of apart."""

from __future__ import annotations

import pytest

from resultlog.consumers.aggregator.store import MARKER_KEY, KafkaChangelog, _changelog
from resultlog.kafka import KafkaConnection


def test_a_flush_larger_than_the_local_queue_lands_whole_and_in_order(
    kafka: KafkaConnection, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = {**_changelog._PRODUCER, "queue.buffering.max.messages": 100}
    monkeypatch.setattr(_changelog, "_PRODUCER", small)
    changelog = KafkaChangelog(kafka)
    entries: list[tuple[bytes, bytes | None]] = [(b"k%05d" % i, b"v%d" % i) for i in range(1000)]
    entries[7] = (b"k00007", None)  # a tombstone among them
    end = changelog.write(0, entries, b"marker")
    read = [(record.key, record.value) for record in changelog.read(0, 0, end)]
    changelog.close()
    assert end == 1001
    assert read == [*entries, (MARKER_KEY, b"marker")]


def test_flushes_in_flight_are_acknowledged_each_with_its_own_offset(
    kafka: KafkaConnection,
) -> None:
    changelog = KafkaChangelog(kafka)
    first = changelog.send(1, [(b"a", b"1"), (b"b", b"1")], b"m1")
    second = changelog.send(1, [(b"a", b"2")], b"m2")
    assert second.wait() == 5
    assert first.done() and first.wait() == 3
    read = [(record.offset, record.key) for record in changelog.read(1, 0, 5)]
    changelog.close()
    assert read == [(0, b"a"), (1, b"b"), (2, MARKER_KEY), (3, b"a"), (4, MARKER_KEY)]
