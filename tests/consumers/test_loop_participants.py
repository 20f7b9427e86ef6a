"""The aggregator's consumer loop drives its participants, against a real broker: each is polled
every pass, hears every folded record once and each partition's life in order (a revocation
while the state still holds the partition), and a failing one stops the loop, which abandons."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from resultlog.consumers._ingest import Ingested
from resultlog.consumers._scan import watermark_offsets
from resultlog.consumers.aggregator._kafka import consumer_overrides
from resultlog.consumers.aggregator._loop import ConsumerLoop
from resultlog.consumers.aggregator._member import Member
from resultlog.consumers.aggregator._metrics import AggregatorMetrics
from resultlog.consumers.aggregator._state import Shared
from resultlog.consumers.aggregator.participants import (
    Adoption,
    Bounds,
    Participant,
    Revocation,
    Why,
)
from resultlog.consumers.errors import ConsumerError
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.kafka import write_many
from tests.support.records import make_record
from tests.support.waiting import wait_for

RUNS = [RunKey(f"loop-{i}", "arith", "openai/gpt-4o") for i in range(6)]
RECORDS = [make_record(i, 0, run_key=run_key) for run_key in RUNS for i in range(5)]


class Recorder(Participant):
    """Notes what the loop tells it, and what the state held when it was told."""

    def __init__(self, shared: Shared) -> None:
        self.shared = shared
        self.events: list[tuple[object, ...]] = []
        self.polls: list[float] = []
        self.offsets: list[tuple[int, int]] = []
        self.fail_when_adopted = 0  # fail in the first poll once this many partitions adopted
        self.consumer: Consumer | None = None
        self.taken_at: dict[int, int] = {}  # the offsets the partitions were assigned at

    def poll(self, now: float) -> None:
        self.polls.append(now)
        adopted = sum(1 for event in self.events if event[0] == "adopted")
        if self.fail_when_adopted and adopted >= self.fail_when_adopted:
            raise ConsumerError("a participant failed")

    def ingested(self, items: Sequence[Ingested]) -> None:
        self.offsets.extend((item.partition, item.offset) for item in items)

    def assigned(self, bounds: Mapping[int, Bounds]) -> None:
        self.events.append(("assigned", sorted(bounds)))
        assert self.consumer is not None
        held = {tp.partition: tp.offset for tp in self.consumer.assignment()}
        self.taken_at.update({p: held[p] for p in bounds})

    def adopted(self, adoption: Adoption) -> None:
        held = adoption.partition in self.shared.state.partitions
        self.events.append(("adopted", adoption.partition, adoption.start, held))

    def revoked(self, revocation: Revocation) -> None:
        with self.shared.lock:
            held = sorted(self.shared.state.partitions)
        gone = sorted(revocation.partitions)
        self.events.append(("revoked", gone, revocation.why, held, dict(revocation.positions)))

    def finish(self) -> None:
        self.events.append(("finish",))

    def close(self) -> None:
        self.events.append(("close",))

    def abandon(self) -> None:
        self.events.append(("abandon",))

    def names(self) -> list[object]:
        """The kinds of event heard, in order."""
        return [event[0] for event in self.events]


@contextmanager
def looping(settings: Settings, state_dir: Path) -> Iterator[tuple[ConsumerLoop, Recorder]]:
    """A consumer loop on its thread with a Recorder after its own participants; stopped
    (and its thread ended) on exit."""
    with KafkaConnection(settings) as kafka:
        shared = Shared()
        metrics = AggregatorMetrics(lambda: (shared.state.health(), 0))
        consumer = kafka.group_consumer(settings.aggregator_group, consumer_overrides(10_000, None))
        stopping = threading.Event()
        recorder = Recorder(shared)
        recorder.consumer = consumer
        loop = ConsumerLoop(
            Member(kafka, shared, metrics, consumer),
            stopping=stopping, publish_interval_s=0.05, state_dir=state_dir,
            extra=[recorder],
        )  # fmt: skip
        thread = threading.Thread(target=loop.run, name="test-loop", daemon=True)
        thread.start()
        try:
            yield loop, recorder
        finally:
            stopping.set()
            thread.join(60)
        assert not thread.is_alive()


def test_participants_hear_each_partitions_life_in_order(
    settings: Settings, tmp_path: Path
) -> None:
    write_many(settings, RECORDS)
    every = list(range(settings.partitions))
    with looping(settings, tmp_path / "state") as (loop, recorder):
        wait_for(lambda: len(recorder.offsets) >= len(RECORDS), "every record ingested")
        polls = len(recorder.polls)
        wait_for(lambda: len(recorder.polls) > polls + 3, "polls once idle")
    assert loop.failure is None, loop.failure
    assert sorted(recorder.offsets) == sorted(set(recorder.offsets))  # each record once
    assert len(recorder.offsets) == len(RECORDS)
    assert recorder.polls == sorted(recorder.polls)  # time.monotonic(), per pass
    names = recorder.names()
    taken = [event[1] for event in recorder.events if event[0] == "assigned" and event[1]]
    assert taken == [every]
    assert names.index("assigned") < names.index("adopted")
    adoptions = [event for event in recorder.events if event[0] == "adopted"]
    # A new machine: nothing restored, every partition folded from its beginning, and the
    # state holds each partition before the participants hear of it.
    assert sorted(adoptions) == [("adopted", p, None, True) for p in every]
    assert names[-3:] == ["finish", "revoked", "close"]
    _, gone, why, held, positions = recorder.events[-2]
    assert (gone, why, held) == (every, Why.REVOKED, every)  # told before the drop
    assert positions == _ends(settings, every)


def test_partitions_are_taken_and_read_at_offsets_the_aggregator_names(
    settings: Settings, tmp_path: Path
) -> None:
    # Never at one librdkafka looks up (committed, else auto.offset.reset's): a late answer
    # to that lookup overrides where the adoption starts reading (a race in librdkafka).
    write_many(settings, RECORDS)
    every = list(range(settings.partitions))
    ends = _ends(settings, every)
    rebuilt = _taken_and_read(settings, tmp_path / "state", {p: 0 for p in every}, len(RECORDS))
    assert rebuilt.taken_at == ends  # paused at the end while restoring
    assert _adoptions(rebuilt) == {p: None for p in every}
    assert len(rebuilt.offsets) == len(RECORDS)
    restored = _taken_and_read(settings, tmp_path / "state", ends, 0)
    assert restored.taken_at == ends
    assert _adoptions(restored) == ends
    assert restored.offsets == []


def _taken_and_read(
    settings: Settings, state_dir: Path, starts: dict[int, int], records: int
) -> Recorder:
    """A loop's recorder once every partition was adopted, is read from `starts`, and
    `records` were ingested."""
    with looping(settings, state_dir) as (loop, recorder):
        consumer = recorder.consumer
        assert consumer is not None
        wait_for(lambda: len(_adoptions(recorder)) == len(starts), "every partition adopted")
        wait_for(
            lambda: {tp.partition: tp.offset for tp in consumer.assignment()} == starts,
            "every partition read from where its state ends",
        )
        wait_for(lambda: len(recorder.offsets) >= records, "every record ingested")
    assert loop.failure is None, loop.failure
    return recorder


def _adoptions(recorder: Recorder) -> dict[object, object]:
    return {event[1]: event[2] for event in recorder.events if event[0] == "adopted"}


def _ends(settings: Settings, partitions: list[int]) -> dict[int, int]:
    with KafkaConnection(settings) as kafka:
        reader = kafka.reader()
        try:
            return {
                p: watermark_offsets(reader, TopicPartition(settings.results_topic, p), 5.0)[1]
                for p in partitions
            }
        finally:
            reader.close()


def test_a_failing_participant_stops_the_loop_which_publishes_nothing_more(
    settings: Settings, tmp_path: Path
) -> None:
    write_many(settings, RECORDS)
    with looping(settings, tmp_path / "state") as (loop, recorder):
        recorder.fail_when_adopted = settings.partitions
        wait_for(lambda: loop.failure is not None, "the participant's failure")
    assert isinstance(loop.failure, ConsumerError)
    assert str(loop.failure) == "a participant failed"
    names = recorder.names()
    assert "finish" not in names and "close" not in names
    assert names[-1] == "abandon"
    # Leaving the group after the failure revokes the partitions, but the state holds none
    # by then: nothing of theirs is published.
    revoked = [event for event in recorder.events if event[0] == "revoked"]
    assert [(event[2], event[3]) for event in revoked] == [(Why.REVOKED, [])]
