"""The one-pass path of Ingestor decides exactly what the full path (decode_key, then
decode_contribution) decides, and takes every common record."""

from __future__ import annotations

import re

from confluent_kafka import KafkaError, Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resultlog.consumers._ingest import Ingested, Ingestor, stretches
from resultlog.consumers.fold import Contribution
from resultlog.schemas import Codec, RunKey, SampleResult, encode_key, partition_for
from tests.support.framings import framings, v2_value
from tests.support.records import make_record
from tests.support.strategies import sample_results

PARTITIONS = 6
TOPIC = "ingest-test"


def _message(key: bytes | None, value: bytes | None, partition: int, offset: int = 7) -> Message:
    return Message(topic=TOPIC, partition=partition, offset=offset, key=key, value=value)


def _record_message(record: SampleResult, value: bytes) -> Message:
    key = encode_key(record.run_key, record.sample_index, record.epoch)
    return _message(key, value, partition_for(record.run_key, PARTITIONS))


def _full(ingestor: Ingestor, message: Message) -> Ingested:
    """What the full path decides of a message (the reference)."""
    return ingestor._full(
        message, message.partition() or 0, message.offset() or 0, message.key(), message.value()
    )


def _same(ours: Ingested, theirs: Ingested) -> None:
    """Equal decisions (a reason may name a buffer object by its address: not compared)."""
    assert _decision(ours) == _decision(theirs)
    assert _poison(ours) == _poison(theirs)


def _decision(item: Ingested) -> tuple[object, ...]:
    """Everything an Ingested holds but its poison."""
    return (
        item.partition, item.offset, item.key, item.value, item.record_id, item.contribution,
    )  # fmt: skip


def _poison(item: Ingested) -> tuple[str, str] | None:
    poison = item.poison
    return None if poison is None else (poison.kind, re.sub("0x[0-9a-f]+", "0x", poison.reason))


def _warmed(record: SampleResult, codec: Codec | None = None) -> Ingestor:
    """An Ingestor that met the record's run key once (so the one-pass path knows it)."""
    ingestor = Ingestor(codec or Codec(), PARTITIONS)
    first = Codec().encode_sample_result(record)
    ingestor.ingest(_record_message(record, first))
    return ingestor


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=sample_results())
def test_a_common_record_takes_the_one_pass_path_with_the_full_paths_answer(
    record: SampleResult,
) -> None:
    ingestor = _warmed(record)
    for name, (codec, value) in framings(record).items():
        message = _record_message(record, value)
        fast = ingestor._fast(message.key(), value, message.partition(), 7)  # type: ignore[arg-type]
        if name in ("v3", "v2"):
            assert fast is not None, name
            _same(fast, _full(ingestor, message))
        else:
            assert fast is None, name  # other writers and framings: the full path reads them
        reader = _warmed(record, codec)
        _same(reader.ingest(message), _full(reader, message))


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    record=sample_results(),
    v2=st.booleans(),
    edits=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.none() | st.integers(0, 400),
)
def test_mutated_values_are_decided_as_the_full_path_decides_them(
    record: SampleResult, v2: bool, edits: list[tuple[int, int]], cut: int | None
) -> None:
    if v2:
        record = record.model_copy(update={"selected_samples": None})
    value = bytearray(v2_value(record.model_dump()) if v2 else Codec().encode_sample_result(record))
    for position, byte in edits:
        value[position % len(value)] = byte
    raw = bytes(value if cut is None else value[:cut])
    ingestor = _warmed(record)
    message = _record_message(record, raw)
    _same(ingestor.ingest(message), _full(ingestor, message))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    record=sample_results(),
    tail=st.sampled_from(
        ["0/0", "00/0", "1/01", "7/-1", "1" * 19 + "/0", "1" * 18 + "/1", "x/0", "3/", "/3", "3"]
    )
    | st.text(alphabet="0123456789/x", max_size=12),
    partition=st.integers(0, PARTITIONS - 1),
)
def test_odd_keys_are_decided_as_the_full_path_decides_them(
    record: SampleResult, tail: str, partition: int
) -> None:
    ingestor = _warmed(record)
    prefix = encode_key(record.run_key, 0, 0).rsplit(b"/", 2)[0]
    message = _message(
        prefix + b"/" + tail.encode(), Codec().encode_sample_result(record), partition
    )
    _same(ingestor.ingest(message), _full(ingestor, message))


def test_a_value_of_another_run_key_is_refused_as_the_full_path_refuses_it() -> None:
    codec = Codec()
    ours, theirs = RunKey("run-1", "arith", "m"), RunKey("run-2", "arith", "m")
    record = make_record(3, 0, run_key=theirs)
    ingestor = _warmed(make_record(3, 0, run_key=ours), codec)
    key = encode_key(ours, record.sample_index, record.epoch)
    message = _message(key, codec.encode_sample_result(record), partition_for(ours, PARTITIONS))
    decided = ingestor.ingest(message)
    assert decided.poison is not None and decided.contribution is None
    _same(decided, _full(ingestor, message))


def test_a_batch_is_decided_in_order_leaving_out_skipped_partitions_and_noting_ends() -> None:
    run_key = RunKey("batch", "arith", "openai/gpt-4o")
    partition = partition_for(run_key, PARTITIONS)
    other = (partition + 1) % PARTITIONS
    records = [make_record(i, 0, run_key=run_key) for i in range(3)]
    values = [Codec().encode_sample_result(record) for record in records]
    keys = [encode_key(run_key, i, 0) for i in range(3)]
    eof = KafkaError(KafkaError._PARTITION_EOF)
    batch = [
        _message(keys[0], values[0], partition, 10),
        _message(b"x", b"y", other, 4),  # a restoring partition's: left out
        _message(keys[1], values[1], partition, 11),
        _message(keys[2], None, partition, 12),  # a tombstone
        Message(topic=TOPIC, partition=partition, offset=13, error=eof),
        Message(topic=TOPIC, partition=other, offset=5, error=eof),
    ]
    decided = Ingestor(Codec(), PARTITIONS).ingest_batch(batch, {other})
    assert [(item.offset, item.record_id) for item in decided.decoded] == [
        (10, (run_key, 0, 0)),
        (11, (run_key, 1, 0)),
        (12, (run_key, 2, 0)),
    ]
    assert decided.decoded[2].contribution is None
    assert decided.ends == [(partition, 13)]
    assert not decided.errors and not decided.unread and decided.registry_error is None


def test_stretches_group_consecutive_records_of_one_run_in_one_partition() -> None:
    a, b = RunKey("a", "arith", "m"), RunKey("b", "arith", "m")

    def item(
        run_key: RunKey | None, offset: int, partition: int = 0, gone: bool = False
    ) -> Ingested:
        contribution = None if gone else Contribution.of(make_record(offset, 0, run_key=a))
        return Ingested(partition, offset, b"k", None, run_key, offset, 0, contribution, None)

    items = [
        item(a, 0), item(a, 1), item(b, 2), item(b, 3, gone=True), item(b, 4),
        item(b, 5, partition=1), item(None, 6), item(a, 7),
    ]  # fmt: skip
    got = [(first.offset, [offset for offset, _ in group]) for first, group in stretches(items)]
    assert got == [(0, [0, 1]), (2, [2]), (3, []), (4, [4]), (5, [5]), (6, []), (7, [7])]
