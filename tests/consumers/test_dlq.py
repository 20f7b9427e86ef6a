"""Dead letters: the writer on its own, and poison records meeting a running aggregator."""

from __future__ import annotations

import time

import httpx
import pytest
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
from resultlog.schemas import Codec, DecodeError, Location, decode_key, encode_key
from resultlog.settings import Settings
from tests.support.aggregator import served
from tests.support.kafka import (
    RawRecord,
    dead_letters,
    message_count,
    produce_raw,
    read_partition,
    run_partition,
    write,
)
from tests.support.records import RUN_KEY, garbage, make_record
from tests.support.summaries import expected
from tests.support.waiting import wait_for


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
        Codec().decode_sample_result(b"", at=Location("src", 1, 7))
    except DecodeError as exc:
        writer.send(
            b"k2",
            None,
            reason=exc.reason,
            source_topic="src",
            source_partition=1,
            source_offset=7,
            kind=reason_kind(exc),
        )
    assert writer.flush(10) == 0
    first, second = sorted(dead_letters(settings, 2), key=lambda m: m.key or b"")
    assert (first.key, first.value) == (b"k1", b"\x00garbage")
    assert first.headers == {
        HEADER_REASON: "bad",
        HEADER_SOURCE_TOPIC: "src",
        HEADER_SOURCE_PARTITION: "2",
        HEADER_SOURCE_OFFSET: "41",
        HEADER_REASON_KIND: "undecodable_value",
    }
    assert (second.key, second.value) == (b"k2", None)
    assert second.headers[HEADER_REASON] == "empty value (0 bytes)"
    assert second.headers[HEADER_REASON_KIND] == "empty_value"
    assert second.headers[HEADER_SOURCE_OFFSET] == "7"


def test_poison_is_dead_lettered_counted_and_never_stalls_the_aggregator(
    settings: Settings, base_url: str
) -> None:
    codec, home = Codec(), run_partition(settings, RUN_KEY)
    valid = codec.encode_sample_result(make_record(3, 0))
    poison = {
        "undecodable_value": (encode_key(RUN_KEY, 0, 0), garbage(64), home),
        "empty_value": (encode_key(RUN_KEY, 2, 0), b"", home),
        "bad_key": (b"not-a-key", valid, 0),
        "unknown_format_version": (encode_key(RUN_KEY, 3, 0), _patched(valid, 10, 4), home),
        "unknown_schema": (encode_key(RUN_KEY, 4, 0), _patched(valid, 2, 0xFF), home),
        "misrouted": (encode_key(RUN_KEY, 3, 0), valid, (home + 1) % settings.partitions),
    }
    write(settings, [make_record(0, 0), make_record(1, 0)])
    assert produce_raw(settings, list(poison.values())) == []
    write(settings, [make_record(5, 0)])
    # The poisoned (0, 0) lost its record, like in replay; (1, 0) and (5, 0) flowed on.
    after_poison = wait_for(
        lambda: (s := served(base_url, RUN_KEY)) and s["records"] == 2 and s, "2"
    )
    assert after_poison == expected(settings, RUN_KEY)
    write(settings, [make_record(0, 0, "I", created_offset_ms=5)])
    wait_for(lambda: (s := served(base_url, RUN_KEY)) and s["records"] == 3, "a later valid one")
    assert served(base_url, RUN_KEY) == expected(settings, RUN_KEY)

    letters = {m.headers[HEADER_REASON_KIND]: m for m in dead_letters(settings, len(poison))}
    assert set(letters) == set(poison)
    for kind, (key, value, partition) in poison.items():
        letter, meta = letters[kind], letters[kind].headers
        assert (letter.key, letter.value) == (key, value), kind
        assert meta[HEADER_SOURCE_TOPIC] == settings.results_topic
        assert meta[HEADER_SOURCE_PARTITION] == str(partition)
        assert meta[HEADER_REASON]
        # The source headers locate the poison itself.
        source = _at(settings, partition, int(meta[HEADER_SOURCE_OFFSET]))
        assert (source.key, source.value) == (key, value), kind
    counts = dead_lettered(base_url)
    assert {kind: counts[kind] for kind in poison} == dict.fromkeys(poison, 1.0)


def test_a_rebuild_does_not_dead_letter_the_same_record_twice(
    settings: Settings, aggregator: Aggregator, base_url: str
) -> None:
    assert produce_raw(settings, [(b"bad", b"x", p) for p in range(settings.partitions)]) == []
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
    # This instance wrote each once; the other one restored the state this one saved (in the
    # shared state directory) when the partitions moved, so it read none of the poison again.
    assert dead_lettered(base_url)["bad_key"] == settings.partitions
    by_other = other.metrics.registry.get_sample_value(
        "resultlog_aggregator_dead_lettered_total", {"reason": "bad_key"}
    )
    restored = sum(
        other.metrics.registry.get_sample_value(f"resultlog_aggregator_{name}_restored_total")
        or 0.0
        for name in ("states", "checkpoints")
    )
    assert by_other == 0 and restored >= 1
    assert message_count(settings, settings.dlq_topic) == settings.partitions


def _metric(base_url: str, name: str) -> float:
    text = httpx.get(base_url + "/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    raise AssertionError(f"no metric {name}")


def _at(settings: Settings, partition: int, offset: int) -> RawRecord:
    """The results-topic message at (partition, offset)."""
    found = read_partition(settings, settings.results_topic, partition)
    (message,) = [m for m in found if m.offset == offset]
    return message


def _patched(raw: bytes, at: int, byte: int) -> bytes:
    """`raw` with one byte replaced (a future format_version, an unknown fingerprint)."""
    return raw[:at] + bytes([byte]) + raw[at + 1 :]


def test_reason_kinds_follow_the_error_classes() -> None:
    codec = Codec()
    valid = codec.encode_sample_result(make_record(0, 0))
    cases = {
        b"": "empty_value",
        garbage(40): "undecodable_value",
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
