"""One-run reads fetch about what their ranges hold."""

from __future__ import annotations

from resultlog.consumers._run_read import one_run_reader
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, partition_for
from tests.support.records import make_record
from tests.support.runindex import full_scan, put, read_one_run

RUN_KEY = RunKey("bounded-run", "arith", "openai/gpt-4o")


def test_a_reader_fetches_and_queues_in_proportion_to_its_ranges() -> None:
    small, large = one_run_reader(100), one_run_reader(1_000_000)
    # A 100-record run: a fetch in the order of its size, never megabytes past it.
    assert small["max.partition.fetch.bytes"] < large["max.partition.fetch.bytes"]
    assert small["max.partition.fetch.bytes"] <= 128 * 1024
    assert small["queued.min.messages"] == 100
    assert small["queued.max.messages.kbytes"] < large["queued.max.messages.kbytes"]
    # Capped however much there is to read, and never zero.
    assert large == one_run_reader(10_000_000)
    assert one_run_reader(0)["queued.min.messages"] >= 1


def test_a_run_among_others_in_its_partition_reads_all_its_records(
    kafka: KafkaConnection,
) -> None:
    settings = kafka.settings
    partitions = settings.partitions
    other = next(
        key
        for n in range(1000)
        if partition_for(key := RunKey(f"bounded-other-{n}", "arith", "m"), partitions)
        == partition_for(RUN_KEY, partitions)
    )
    put(
        settings,
        [make_record(i, 0, run_key=other, epochs=1, dataset_size=1000) for i in range(300)],
    )
    put(settings, [make_record(i, 0, run_key=RUN_KEY, epochs=1) for i in range(20)])
    put(
        settings,
        [make_record(i, 0, run_key=other, epochs=1, dataset_size=1000) for i in range(300, 600)],
    )
    read = read_one_run(settings, RUN_KEY)
    assert len(read.latest) == 20
    assert read.latest == full_scan(settings, RUN_KEY)
