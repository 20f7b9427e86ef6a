"""A scripted solver and a raw reader of a run key's partition, for the reliability tests."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from confluent_kafka import Consumer, TopicPartition

from resultlog.producer import Benchmark, Completion, ModelError, Sample, Solver
from resultlog.producer.context import current_sample
from resultlog.schemas import Codec, RunKey, SampleResult, partition_for
from resultlog.settings import Settings


class ScriptedModel:
    """Answers every pair right, except the pairs told to fail with a 429; counts calls."""

    def __init__(self, rate_limited: Iterable[tuple[str, int]] = ()) -> None:
        self.rate_limited = set(rate_limited)
        self.calls: Counter[tuple[str, int]] = Counter()

    @property
    def solver(self) -> Solver:
        async def solve(benchmark: Benchmark, sample: Sample) -> Completion:
            context = current_sample()
            assert context is not None
            pair = (sample.id, context.epoch)
            self.calls[pair] += 1
            if pair in self.rate_limited:
                raise ModelError("model endpoint returned HTTP 429", status=429)
            return Completion(
                text=sample.target or "",
                reasoning=None,
                tool_calls=None,
                generation_id=f"gen-{sample.id}-{context.epoch}",
                model="scripted",
                usage=None,
                raw={},
                elapsed_ms=1,
            )

        return solve


def partition_log(settings: Settings, run_key: RunKey) -> list[tuple[bytes, SampleResult, bytes]]:
    """Every (key, record, raw value) of the run key's partition, in offset order."""
    codec = Codec()
    consumer = Consumer(
        {**settings.client_config(), "group.id": "scripted", "enable.partition.eof": True}
    )
    partition = partition_for(run_key, settings.partitions)
    consumer.assign([TopicPartition(settings.results_topic, partition, 0)])
    found: list[tuple[bytes, SampleResult, bytes]] = []
    while True:
        message = consumer.poll(10)
        assert message is not None, "no end of partition within 10 s"
        if message.error() is not None:
            break
        key, value = message.key(), message.value()
        assert key is not None and value is not None
        record = codec.decode_sample_result(value)
        if record.run_key == run_key:
            found.append((key, record, value))
    consumer.close()
    return found


def latest(settings: Settings, run_key: RunKey) -> dict[tuple[int, int], SampleResult]:
    """The latest record of each (sample_index, epoch), as compaction will keep it."""
    return {(r.sample_index, r.epoch): r for _, r, _ in partition_log(settings, run_key)}
