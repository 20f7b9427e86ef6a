"""Publish run summaries to the compacted summaries topic, keyed by run key."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from resultlog.consumers._clients import client_config as with_logger
from resultlog.consumers._scan import partition_count
from resultlog.consumers.errors import ConsumerError
from resultlog.schemas import Codec, RunSummary, partition_for

__all__ = ["publish_summaries"]


def publish_summaries(
    client_config: Mapping[str, Any],
    topic: str,
    summaries: Iterable[RunSummary],
    codec: Codec,
    *,
    timeout_s: float = 30.0,
) -> int:
    """Write each summary (acks=all, idempotent) and wait until all are acknowledged."""
    producer = Producer(with_logger(client_config, **{"enable.idempotence": True, "acks": "all"}))
    failures: list[str] = []

    def on_delivery(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error.str())

    try:
        partitions = partition_count(producer, topic, timeout_s)
        count = 0
        for summary in summaries:
            producer.produce(
                topic,
                key=summary.key,
                value=codec.encode_run_summary(summary, topic),
                partition=partition_for(summary.run_key, partitions),
                on_delivery=on_delivery,
            )
            producer.poll(0)
            count += 1
        if producer.flush(timeout_s) > 0:
            failures.append(f"not acknowledged within {timeout_s:.0f}s")
    except KafkaException as exc:
        raise ConsumerError(f"cannot publish summaries to {topic}: {exc.args[0]}") from exc
    if failures:
        raise ConsumerError(f"publishing summaries to {topic} failed: {failures[0]}")
    return count
