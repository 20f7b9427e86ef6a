"""Purge: delete one run from the log by writing tombstones for all of its keys.

What "deleted" means to each reader, once `purge_run` returns:
- resume and `status` find no records of the run (a tombstone deletes its key);
- `replay` of the run reports an empty run (records 0) and `replay --all` omits it;
- the aggregator drops the run: `GET /runs/{run_id}/{benchmark}/{model}` answers 404, and it
  publishes a tombstone for the run's summary as well;
- the summaries topic holds a tombstone for the run key, so its last summary is gone;
- compaction later removes the records and, after `delete.retention.ms`, the tombstones;
- the run's entry in the run index is tombstoned too (best effort: a reader without an entry
  reads the whole partition, and an entry the aggregator writes again still holds).

Every key of the run key's partition that starts with the run key's prefix and still has a
value gets a tombstone, whatever that value is: an undecodable latest value, or a key with the
run's prefix that does not parse, is part of the run and is deleted with it (the tombstone of
such a key is itself a bad key to `replay --all` and the aggregator's dead-letter topic until
compaction removes it). The summary tombstone is written even when no record was found, so an
interrupted purge completes when run again. A worker still writing the run while it is purged
can leave records behind: stop the run first.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from resultlog.consumers.errors import ConsumerError

# The resume reader's partition scan is exactly what purge needs: the same keys resume sees.
from resultlog.consumers.resume import latest_run_values
from resultlog.kafka import KafkaClientError, KafkaConnection, produce
from resultlog.schemas import RunKey, encode_run_key, partition_for, run_key_prefix

__all__ = ["PurgeError", "purge_run"]

log = logging.getLogger(__name__)


class PurgeError(ConsumerError):
    """A purge could not read the run's keys or have its tombstones acknowledged."""


def purge_run(kafka: KafkaConnection, run_key: RunKey, *, timeout_s: float = 30.0) -> int:
    """Tombstone every live key of the run and its summary; return how many records it deleted."""
    partition, live = _live_keys(kafka, run_key, timeout_s)
    log.info("purging %d record(s) of %s", len(live), run_key)
    producer = kafka.durable_producer()
    failures: list[str] = []
    try:
        _tombstones(producer, kafka.results_topic, partition, live, failures)
        count = kafka.partition_count(kafka.summaries_topic, producer, timeout_s=timeout_s)
        summary_key = [encode_run_key(run_key)]
        summaries = partition_for(run_key, count)
        _tombstones(producer, kafka.summaries_topic, summaries, summary_key, failures)
        if producer.flush(timeout_s) > 0:
            failures.append(f"not acknowledged within {timeout_s:.0f}s")
    except KafkaClientError as exc:
        raise PurgeError(f"cannot purge {run_key}: {exc}") from exc
    if failures:
        raise PurgeError(f"purging {run_key} failed: {failures[0]}")
    _forget_index_entry(kafka, producer, run_key, partition, timeout_s)
    return len(live)


def _forget_index_entry(
    kafka: KafkaConnection, producer: Producer, run_key: RunKey, partition: int, timeout_s: float
) -> None:
    """Tombstone the run's index entry, after its records' tombstones (a warning if not)."""
    topic = kafka.index_topic
    reader = kafka.reader()
    try:  # asked through a consumer: a producer's metadata request may auto-create a topic
        found = reader.list_topics(topic, timeout=timeout_s).topics.get(topic)
    except KafkaException as exc:
        found = None
        log.debug("no metadata of %s: %s", topic, exc)
    finally:
        reader.close()
    if found is None or found.error is not None or partition >= len(found.partitions):
        return
    failures: list[str] = []
    try:
        _tombstones(producer, topic, partition, [run_key_prefix(run_key)], failures)
        if producer.flush(timeout_s) > 0:
            failures.append(f"not acknowledged within {timeout_s:.0f}s")
    except KafkaClientError as exc:
        failures.append(str(exc))
    if failures:
        log.warning("the run index entry of %s stays (harmless): %s", run_key, failures[0])


def _live_keys(
    kafka: KafkaConnection, run_key: RunKey, timeout_s: float
) -> tuple[int, dict[bytes, tuple[int, bytes]]]:
    """The run key's partition and its keys whose latest value is not a tombstone."""
    try:
        partition, live = latest_run_values(kafka, run_key, timeout_s=timeout_s)
    except (ConsumerError, KafkaClientError) as exc:
        raise PurgeError(str(exc)) from exc
    return partition, live


def _tombstones(
    producer: Producer, topic: str, partition: int, keys: Iterable[bytes], failures: list[str]
) -> None:
    """Queue a null value for each key; delivery errors are collected into `failures`."""

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error.str())

    for key in keys:
        produce(producer, topic, key, None, partition=partition, on_delivery=on_delivery)
