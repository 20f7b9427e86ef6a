"""Write checkpoints on a thread of their own, from snapshots the consumer thread takes.

Taking a snapshot copies each run's list of (immutable) contributions under the state lock:
tens of milliseconds at a million keys. Encoding and producing happen here, so ingestion and
readers go on meanwhile. A generation is its pieces, then (once every piece is acknowledged)
its header; then the pieces of older generations are tombstoned. A failed write leaves the
previous header in place: a restore never sees half a generation as complete.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from confluent_kafka import KafkaError, Message

from resultlog.consumers.aggregator.checkpoint._codec import (
    CheckpointId,
    Header,
    RunRows,
    encode_header,
    header_key,
    iter_pieces,
    piece_key,
)
from resultlog.kafka import KafkaClientError, KafkaConnection, produce

__all__ = ["CheckpointWriter", "Snapshot"]

log = logging.getLogger(__name__)
_FLUSH_S = 30.0
_PIECES_PER_SEND = 16


@dataclass(frozen=True)
class Snapshot:
    """One partition's folds as of `next_offset`, to be written (`runs` is read once, on the
    writer's thread: a list, or a state store's snapshot read lazily)."""

    partition: int
    next_offset: int
    runs: Iterable[RunRows]


class _Counted:
    """The runs of a snapshot, counted as they are read."""

    def __init__(self, runs: Iterable[RunRows]) -> None:
        self._runs = runs
        self.runs = 0
        self.contributions = 0

    def __iter__(self) -> Iterator[RunRows]:
        for run in self._runs:
            self.runs += 1
            self.contributions += len(run[1])
            yield run


class CheckpointWriter:
    """Writes submitted snapshots one at a time; the newest snapshot of a partition wins."""

    def __init__(
        self,
        kafka: KafkaConnection,
        partitions: int,
        checkpoint_partitions: int,
        *,
        on_written: Callable[[float], None],
        on_failed: Callable[[], None],
    ) -> None:
        self._topic = kafka.checkpoints_topic
        self._results_topic = kafka.results_topic
        self._partitions = partitions
        self._checkpoint_partitions = checkpoint_partitions
        self._on_written = on_written
        self._on_failed = on_failed
        self._writer = uuid.uuid4().hex[:16]
        self.log_id: tuple[str, str] | None = None  # (cluster ID, topic ID) to name
        self._producer = kafka.durable_producer()
        self._changed = threading.Condition()
        self._pending: dict[int, Snapshot] = {}
        self._writing: int | None = None
        self._generation: dict[int, int] = {}
        self._stale: dict[int, list[bytes]] = {}  # piece keys to tombstone after a success
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="resultlog-checkpoints", daemon=True)
        self._thread.start()

    def adopt(self, partition: int, generation: int, stale: list[bytes]) -> None:
        """What a scan found: generations to number after, pieces nobody needs."""
        with self._changed:
            self._generation[partition] = max(self._generation.get(partition, 0), generation)
            self._stale.setdefault(partition, []).extend(stale)

    def submit(self, snapshot: Snapshot) -> None:
        """Queue a snapshot (replacing one of the same partition not started yet)."""
        with self._changed:
            self._pending[snapshot.partition] = snapshot
            self._changed.notify_all()

    def busy(self, partition: int) -> bool:
        """Whether a snapshot of the partition is queued or being written."""
        with self._changed:
            return partition in self._pending or self._writing == partition

    def wait(self, partitions: set[int], timeout_s: float = _FLUSH_S) -> bool:
        """Block until no snapshot of these partitions is queued or written; True if so."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self._pending.keys() & partitions or self._writing in partitions:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def close(self, timeout_s: float = _FLUSH_S) -> None:
        """Write what is queued (within the timeout), then stop."""
        with self._changed:
            self._closing = True
            self._changed.notify_all()
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._pending and not self._closing:
                    self._changed.wait()
                if not self._pending:
                    return
                partition = min(self._pending)
                snapshot = self._pending.pop(partition)
                self._writing = partition
            try:
                self._write(snapshot)
            except Exception as exc:  # a checkpoint is an optimisation: never stop serving
                log.warning("checkpointing %s[%d] failed: %s", self._results_topic, partition, exc)
                self._on_failed()
            finally:
                with self._changed:
                    self._writing = None
                    self._changed.notify_all()

    def _write(self, snapshot: Snapshot) -> None:
        started = time.perf_counter()
        partition = snapshot.partition
        with self._changed:
            generation = self._generation.get(partition, 0) + 1
            self._generation[partition] = generation
        cluster_id, topic_id = self.log_id or ("", "")
        checkpoint = CheckpointId(
            self._results_topic,
            partition,
            self._partitions,
            generation,
            self._writer,
            snapshot.next_offset,
            cluster_id,
            topic_id,
        )
        counted = _Counted(snapshot.runs)
        keys: list[bytes] = []
        try:
            batch: list[tuple[bytes, bytes | None]] = []
            # Sent as encoded, a few at a time: memory holds a few pieces, not the partition.
            for index, piece in enumerate(iter_pieces(checkpoint, counted)):
                keys.append(piece_key(checkpoint, index))
                batch.append((keys[-1], piece))
                if len(batch) >= _PIECES_PER_SEND:
                    self._send(partition, batch)
                    batch = []
            self._send(partition, batch)
            header = Header(
                checkpoint,
                len(keys),
                int(time.time() * 1000),
                counted.runs,
                counted.contributions,
            )
            self._send(
                partition, [(header_key(self._results_topic, partition), encode_header(header))]
            )
        except BaseException:
            with self._changed:  # pieces that may have landed: tombstoned after a success
                self._stale.setdefault(partition, []).extend(keys)
            raise
        with self._changed:
            stale, self._stale[partition] = self._stale.get(partition, []), keys
        self._send(partition, [(key, None) for key in stale])
        self._on_written(time.perf_counter() - started)

    def _send(self, partition: int, messages: list[tuple[bytes, bytes | None]]) -> None:
        """Produce the messages to the partition's checkpoints partition; raise unless all
        are acknowledged."""
        errors: list[str] = []

        def delivered(error: KafkaError | None, _message: Message) -> None:
            if error is not None:
                errors.append(str(error.str()))

        target = partition % self._checkpoint_partitions
        for key, value in messages:
            produce(
                self._producer, self._topic, key, value, partition=target,
                on_delivery=delivered, wait_s=_FLUSH_S,
            )  # fmt: skip
        if self._producer.flush(_FLUSH_S) > 0:
            raise KafkaClientError(f"{self._topic} did not acknowledge in {_FLUSH_S:g}s")
        if errors:
            raise KafkaClientError(f"{self._topic} refused a checkpoint record: {errors[0]}")
