"""Dead letters as large as the dead-letter topic accepts, and each source record once."""

from __future__ import annotations

import time

from resultlog.consumers import dlq
from resultlog.kafka import KafkaConnection, produce
from resultlog.schemas import encode_key
from resultlog.settings import Settings
from resultlog.topics import ensure_topics, topic_specs
from tests.support.aggregator import served, serving_aggregator
from tests.support.kafka import dead_letters, message_count, run_partition, write
from tests.support.records import RUN_KEY, garbage, make_record
from tests.support.waiting import wait_for


def test_a_poison_record_over_1_mb_is_dead_lettered_once_across_rebuilds(
    settings: Settings,
) -> None:
    key, big = encode_key(RUN_KEY, 7, 0), garbage(2 * 1024 * 1024)  # incompressible
    with KafkaConnection(settings) as kafka:
        producer = kafka.durable_producer({"message.max.bytes": 10_000_000})
        home = run_partition(settings, RUN_KEY)
        produce(producer, settings.results_topic, key, big, partition=home)
        assert producer.flush(30) == 0
    write(settings, [make_record(0, 0)])
    with serving_aggregator(settings) as (_, url):
        wait_for(lambda: served(url, RUN_KEY), "the run beside the poison")
        (letter,) = dead_letters(settings, 1)
        assert (letter.key, letter.value) == (key, big)
    # A rebuild from the start of the log (no changelog to restore from) meets the poison again.
    fresh = settings.changelog_topic + "-2"
    rebuilt = settings.model_copy(update={"changelog_topic": fresh})
    with KafkaConnection(rebuilt) as kafka:
        ensure_topics(kafka, [s for s in topic_specs(rebuilt) if s.name == fresh])
    with serving_aggregator(rebuilt) as (aggregator, url):
        wait_for(lambda: served(url, RUN_KEY), "the rebuilt run")
        time.sleep(0.5)  # asserting an absence: a second dead letter would be delivered by now
        again = aggregator.metrics.registry.get_sample_value(
            "resultlog_aggregator_dead_lettered_total", {"reason": "undecodable_value"}
        )
        assert again in (None, 0.0)
    assert message_count(settings, settings.dlq_topic) == 1


def test_a_record_over_the_dead_letter_topics_limit_keeps_its_place(settings: Settings) -> None:
    writer = dlq.DeadLetterWriter(KafkaConnection(settings))
    limit: int = writer.limit  # type: ignore[attr-defined,unused-ignore]
    huge = garbage(limit + 1)
    where = {"source_topic": "src", "source_partition": 0, "source_offset": 9}
    assert writer.send(b"k", huge, reason="too big", **where)  # type: ignore[arg-type]
    assert writer.flush(30) == 0
    (letter,) = dead_letters(settings, 1)
    assert letter.key == b"k" and letter.value is None
    assert letter.headers["resultlog.value.omitted"] == str(len(huge))
    assert letter.headers[dlq.HEADER_SOURCE_OFFSET] == "9"
    again = dlq.DeadLetterWriter(KafkaConnection(settings))
    assert not again.send(b"k", huge, reason="too big", **where)  # type: ignore[arg-type]
