"""Writing a run's chunk tasks to the work topic, each acknowledged by the broker."""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import KafkaError, Message

from resultlog.kafka import KafkaClientError, KafkaConnection, produce
from resultlog.producer.worker._plan import WorkError
from resultlog.schemas import ChunkTask

__all__ = ["submit_chunks"]

_FLUSH_S = 30.0


def submit_chunks(kafka: KafkaConnection, tasks: Sequence[ChunkTask]) -> int:
    """Write the tasks (acks=all, idempotent); return how many. WorkError if any is not acked."""
    topic = kafka.work_topic
    values = [kafka.codec.encode_chunk_task(task, topic) for task in tasks]  # all, or none
    producer = kafka.durable_producer()
    try:
        partitions = kafka.partition_count(topic, producer)
    except KafkaClientError as exc:
        raise WorkError(str(exc)) from exc
    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error.str())

    for task, value in zip(tasks, values, strict=True):
        try:
            produce(
                producer,
                topic,
                task.key,
                value,
                partition=task.partition(partitions),
                on_delivery=delivered,
            )
        except KafkaClientError as exc:
            raise WorkError(f"cannot write chunk {task.chunk_index} to {topic}: {exc}") from exc
    unacknowledged = producer.flush(_FLUSH_S)
    if failures or unacknowledged:
        reason = failures[0] if failures else f"{unacknowledged} not acknowledged in time"
        raise WorkError(f"writing {len(tasks)} chunk tasks to {topic} failed: {reason}")
    return len(tasks)
