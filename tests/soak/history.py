"""What the checker reads: the model server's request log and the results topic, each tailed
incrementally, and replay of one run up to given offsets."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from resultlog.consumers import fold_records
from resultlog.kafka import KafkaConnection
from resultlog.schemas import Location, RunKey, run_key_prefix
from tests.soak.checker import Ask

__all__ = ["LogTail", "RequestLog"]

_READ_TIMEOUT_S = 20.0


class RequestLog:
    """The model server's JSONL request log, read as it grows (whole lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._done = 0  # bytes read
        self._asks: list[Ask] = []
        self._lines = 0

    def refresh(self) -> int:
        """Read what was appended; the number of lines so far."""
        with self._lock:
            if not self.path.exists():
                return self._lines
            with self.path.open("rb") as handle:
                handle.seek(self._done)
                chunk = handle.read()
            whole = chunk[: chunk.rfind(b"\n") + 1]
            self._done += len(whole)
            for raw in whole.splitlines():
                line = json.loads(raw)
                if isinstance(line.get("model"), str) and line.get("sample_id") is not None:
                    self._asks.append(
                        Ask(self._lines, line["model"], line["sample_id"], line["epoch"])
                    )
                self._lines += 1
            return self._lines

    def asks(self) -> list[Ask]:
        """Every stamped request so far."""
        self.refresh()
        with self._lock:
            return list(self._asks)


class LogTail:
    """The results topic's partitions read into memory as far as asked (the soak's runs are
    small), so that replay to any offset folds what the log held below it."""

    def __init__(self, kafka: KafkaConnection) -> None:
        self._kafka = kafka
        self._lock = threading.Lock()
        self._messages: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        self._next: dict[int, int] = {}
        self._consumer = kafka.reader({"enable.partition.eof": False})

    def close(self) -> None:
        """Close the reader."""
        self._consumer.close()

    def replay(self, run_key: RunKey, partition: int, end: int) -> dict[str, Any] | None:
        """The run's summary over the records below `end` (JSON, without as_of); None when
        it has none there."""
        with self._lock:
            self._read_to(partition, end)
            prefix = run_key_prefix(run_key)
            latest: dict[bytes, tuple[int, bytes | None]] = {}
            for offset, key, value in self._messages[partition]:
                if offset >= end:
                    break
                if key.startswith(prefix):
                    latest[key] = (offset, value)
        topic, codec = self._kafka.results_topic, self._kafka.codec
        records = [
            codec.decode_sample_result(value, at=Location(topic, partition, offset))
            for offset, value in latest.values()
            if value is not None
        ]
        if not records:
            return None
        summary = fold_records(records, run_key).model_dump(mode="json")
        summary.pop("as_of", None)
        return summary

    def _read_to(self, partition: int, end: int) -> None:
        """Read the partition until the position reaches `end` (TimeoutError past a bound)."""
        messages = self._messages.setdefault(partition, [])
        position = self._next.get(partition, 0)
        if position >= end:
            return
        topic = self._kafka.results_topic
        self._consumer.assign([TopicPartition(topic, partition, position)])
        deadline = time.monotonic() + _READ_TIMEOUT_S
        while position < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}[{partition}] not read to {end} (at {position})")
            batch = self._consumer.consume(500, 0.5)
            for message in batch:
                offset = message.offset()
                if message.error() is not None or offset is None:
                    continue
                messages.append((offset, message.key() or b"", message.value()))
                position = offset + 1
            if not batch:  # control records (transactions) leave gaps the position skips
                found = self._consumer.position([TopicPartition(topic, partition)])[0].offset
                position = max(position, found)
        self._next[partition] = position
