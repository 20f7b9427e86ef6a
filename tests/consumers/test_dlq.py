"""Dead letters: the writer on its own, and poison records meeting a running aggregator."""

from __future__ import annotations

import os
import time

import httpx
import pytest
from confluent_kafka import Consumer, Message, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from resultlog.consumers.aggregator import Aggregator
from resultlog.consumers.dlq import (
    HEADER_REASON,
    HEADER_REASON_KIND,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_TOPIC,
    DeadLetterWriter,
    reason_kind,
)
from resultlog.kafka import KafkaConnection
from resultlog.schemas import Codec, DecodeError, decode_key, encode_key, partition_for
from resultlog.settings import Settings
from tests.consumers.support import (
    expected,
    produce_raw,
    served,
    wait_for,
    write,
)
from tests.factories import RUN_KEY, make_record


def dead_letters(settings: Settings, count: int, timeout_s: float = 20.0) -> list[Message]:
    """The first `count` messages of the dead-letter topic (fails if fewer arrive in time)."""
    consumer = Consumer(
        {**settings.client_config(), "group.id": "inspect", "enable.partition.eof": False}
    )
    consumer.assign([TopicPartition(settings.dlq_topic, p, 0) for p in range(settings.partitions)])
    found: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(found) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            found.append(message)
    consumer.close()
    assert len(found) == count, f"{len(found)} dead letters, expected {count}"
    return found


def headers(message: Message) -> dict[str, str]:
    """A message's headers as text."""
    return {name: (value or b"").decode() for name, value in message.headers() or []}


def dead_lettered(base_url: str) -> dict[str, float]:
    """resultlog_aggregator_dead_lettered_total by reason, from /metrics."""
    text = httpx.get(base_url + "/metrics").text
    for family in text_string_to_metric_families(text):
        if family.name == "resultlog_aggregator_dead_lettered":
            return {
                s.labels["reason"]: s.value for s in family.samples if s.name.endswith("_total")
            }
    raise AssertionError("no dead-letter metric")


def test_the_writer_copies_key_and_value_with_reason_and_source_headers(
    settings: Settings,
) -> None:
    writer = DeadLetterWriter(KafkaConnection(settings))
    writer.send(
        b"k1",
        b"\x00garbage",
        reason="bad",
        source_topic="src",
        source_partition=2,
        source_offset=41,
        kind="undecodable_value",
    )
    try:
        Codec().decode_sample_result(b"", topic="src", partition=1, offset=7)
    except DecodeError as exc:
        writer.send_error(exc, b"k2", None)
    assert writer.flush(10) == 0
    first, second = sorted(dead_letters(settings, 2), key=lambda m: m.key() or b"")
    assert (first.key(), first.value()) == (b"k1", b"\x00garbage")
    assert headers(first) == {
        HEADER_REASON: "bad",
        HEADER_SOURCE_TOPIC: "src",
        HEADER_SOURCE_PARTITION: "2",
        HEADER_SOURCE_OFFSET: "41",
        HEADER_REASON_KIND: "undecodable_value",
    }
    assert (second.key(), second.value()) == (b"k2", None)
    assert headers(second)[HEADER_REASON] == "empty value (0 bytes)"
    assert headers(second)[HEADER_REASON_KIND] == "empty_value"
    assert headers(second)[HEADER_SOURCE_OFFSET] == "7"


def test_an_unlocated_error_is_refused(settings: Settings) -> None:
    writer = DeadLetterWriter(KafkaConnection(settings))
    with pytest.raises(ValueError, match="located"):
        writer.send_error(DecodeError("x", b"x"), None, b"x")


def test_poison_is_dead_lettered_counted_and_never_stalls_the_aggregator(
    settings: Settings, base_url: str
) -> None:
    codec, home = Codec(), partition_for(RUN_KEY, settings.partitions)
    valid = codec.encode_sample_result(make_record(3, 0))
    poison = {
        "undecodable_value": (encode_key(RUN_KEY, 0, 0), os.urandom(64), home),
        "empty_value": (encode_key(RUN_KEY, 2, 0), b"", home),
        "bad_key": (b"not-a-key", valid, 0),
        "unknown_format_version": (encode_key(RUN_KEY, 3, 0), _patched(valid, 10, 4), home),
        "unknown_schema": (encode_key(RUN_KEY, 4, 0), _patched(valid, 2, 0xFF), home),
        "misrouted": (encode_key(RUN_KEY, 3, 0), valid, (home + 1) % settings.partitions),
    }
    write(settings, [make_record(0, 0), make_record(1, 0)])
    produce_raw(settings, list(poison.values()))
    write(settings, [make_record(5, 0)])
    # The poisoned (0, 0) lost its record, like in replay; (1, 0) and (5, 0) flowed on.
    after_poison = wait_for(
        lambda: (s := served(base_url, RUN_KEY)) and s["records"] == 2 and s, "2"
    )
    assert after_poison == expected(settings, RUN_KEY)
    write(settings, [make_record(0, 0, "I", created_offset_ms=5)])
    wait_for(lambda: (s := served(base_url, RUN_KEY)) and s["records"] == 3, "a later valid one")
    assert served(base_url, RUN_KEY) == expected(settings, RUN_KEY)

    letters = {headers(m)[HEADER_REASON_KIND]: m for m in dead_letters(settings, len(poison))}
    assert set(letters) == set(poison)
    for kind, (key, value, partition) in poison.items():
        letter, meta = letters[kind], headers(letters[kind])
        assert (letter.key(), letter.value()) == (key, value), kind
        assert meta[HEADER_SOURCE_TOPIC] == settings.results_topic
        assert meta[HEADER_SOURCE_PARTITION] == str(partition)
        assert int(meta[HEADER_SOURCE_OFFSET]) >= 0 and meta[HEADER_REASON]
    counts = dead_lettered(base_url)
    assert {kind: counts[kind] for kind in poison} == dict.fromkeys(poison, 1.0)


def test_a_rebuild_does_not_dead_letter_the_same_record_twice(
    settings: Settings, aggregator: Aggregator, base_url: str
) -> None:
    produce_raw(settings, [(b"bad", b"x", p) for p in range(settings.partitions)])
    dead_letters(settings, settings.partitions)
    other = Aggregator(KafkaConnection(settings), publish_interval_s=0.05)
    other.start()  # takes some partitions away; stopping it hands them back for a rebuild
    wait_for(lambda: other.health().ready and other.health().partitions, "a rebalance")
    other.stop()
    wait_for(lambda: len(aggregator.health().partitions) == settings.partitions, "all back")
    wait_for(lambda: aggregator.health().ready, "the rebuild")
    write(settings, [make_record(0, 0)])
    wait_for(lambda: served(base_url, RUN_KEY), "a record after the rebuild")
    assert _metric(base_url, "resultlog_aggregator_rebuilds_total") > settings.partitions
    time.sleep(0.5)  # asserting an absence: a duplicate would have been delivered by now
    # This instance wrote each once; the other one wrote its partitions' again (at-least-once).
    assert dead_lettered(base_url)["bad_key"] == settings.partitions
    by_other = other.metrics.registry.get_sample_value(
        "resultlog_aggregator_dead_lettered_total", {"reason": "bad_key"}
    )
    assert by_other is not None
    assert 1 <= by_other < settings.partitions
    assert _count_dead_letters(settings) == settings.partitions + by_other


def _metric(base_url: str, name: str) -> float:
    text = httpx.get(base_url + "/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    raise AssertionError(f"no metric {name}")


def _count_dead_letters(settings: Settings) -> int:
    consumer = Consumer({**settings.client_config(), "group.id": "inspect"})
    total = 0
    for partition in range(settings.partitions):
        low, high = consumer.get_watermark_offsets(
            TopicPartition(settings.dlq_topic, partition), timeout=10
        )
        total += high - low
    consumer.close()
    return total


def _patched(raw: bytes, at: int, byte: int) -> bytes:
    """`raw` with one byte replaced (a future format_version, an unknown fingerprint)."""
    return raw[:at] + bytes([byte]) + raw[at + 1 :]


def test_reason_kinds_follow_the_error_classes() -> None:
    codec = Codec()
    valid = codec.encode_sample_result(make_record(0, 0))
    cases = {
        b"": "empty_value",
        os.urandom(40): "undecodable_value",
        _patched(valid, 10, 4): "unknown_format_version",
        _patched(valid, 2, 0xFF): "unknown_schema",
    }
    for raw, kind in cases.items():
        with pytest.raises(DecodeError) as caught:
            codec.decode_sample_result(raw)
        assert reason_kind(caught.value) == kind
    with pytest.raises(DecodeError) as bad_key:
        decode_key(b"a/b")
    assert reason_kind(bad_key.value) == "bad_key"
