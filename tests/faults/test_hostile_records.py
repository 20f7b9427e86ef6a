"""Hostile bytes on the results topic: every reader keeps going and counts each bad record once.

Next to a real run: random bytes, single-object framing of an unknown fingerprint, a future
format_version, a truncated record, an empty (not null) value, and keys that do not parse.
Resume/status and replay of the run count the run's bad latest records, `replay --all` and the
aggregator count all of them, and the aggregator dead-letters each with its headers.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from io import BytesIO

import httpx
import pytest
from fastavro import schemaless_writer

from resultlog.consumers import replay_all, replay_run
from resultlog.consumers.dlq import (
    HEADER_REASON,
    HEADER_REASON_KIND,
    HEADER_SOURCE_OFFSET,
    HEADER_SOURCE_PARTITION,
    HEADER_SOURCE_TOPIC,
)
from resultlog.kafka import KafkaConnection
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.offline import ModelServer
from resultlog.schemas import Codec, RunKey, encode_key, run_key_prefix, shipped_catalog
from resultlog.schemas.codec import SINGLE_OBJECT_MAGIC
from tests.support.aggregator import path, serving_aggregator
from tests.support.audit import report
from tests.support.cli import child_env, printed_json, run_cli
from tests.support.kafka import (
    RawMessage,
    dead_letters,
    message_count,
    produce_raw,
    run_partition,
    topic_settings,
)
from tests.support.records import garbage, make_record
from tests.support.runs import MODEL, run_once
from tests.support.summaries import bare, expected

pytestmark = pytest.mark.faults

SAMPLES, EPOCHS = 12, 2
RUN = RunKey("hostile", "arith", MODEL)


def _future_version() -> bytes:
    """A well-formed v1 Avro record that claims format_version 2."""
    schema = shipped_catalog().get("resultlog.SampleResult", 1)
    datum = make_record(101, 0, run_key=RUN, dataset_size=None).model_dump()
    datum["format_version"] = 2
    body = BytesIO()
    schemaless_writer(body, schema.parsed, datum)
    return SINGLE_OBJECT_MAGIC + schema.fingerprint + body.getvalue()


def _hostile(partition: int) -> tuple[list[RawMessage], list[RawMessage]]:
    """(bad values under the run's keys, bad keys with a valid value), for the run's partition."""
    valid = Codec().encode_sample_result(make_record(100, 0, run_key=RUN, dataset_size=None))
    values: list[RawMessage] = [
        (encode_key(RUN, 100, 0), garbage(64), partition),
        (encode_key(RUN, 101, 0), _future_version(), partition),
        (encode_key(RUN, 102, 0), SINGLE_OBJECT_MAGIC + b"\x00" * 8 + valid[10:], partition),
        (encode_key(RUN, 103, 0), valid[: len(valid) // 2], partition),
        (encode_key(RUN, 104, 0), b"", partition),
    ]
    keys: list[RawMessage] = [
        # The run's prefix: resume sees it.
        (run_key_prefix(RUN) + b"not-a-number/0", valid, partition),
        (b"\xff\xfe not ascii", valid, partition),
        (b"too/few/parts", valid, partition),
        (b"", valid, partition),
    ]
    return values, keys


def _metric(text: str, reason: str) -> float:
    match = re.search(rf'dead_lettered_total\{{reason="{reason}"\}} (\S+)', text)
    assert match, text
    return float(match.group(1))


def test_every_reader_survives_and_counts_each_bad_record_once(kafka_bootstrap: str) -> None:
    settings = topic_settings(kafka_bootstrap)
    bench = limit_samples(arith(), SAMPLES)
    with ModelServer(latency_s=0.0) as server:
        clean = asyncio.run(run_once(settings, bench, RUN.run_id, server.base_url, epochs=EPOCHS))
    partition = run_partition(settings, RUN)
    values, keys = _hostile(partition)
    assert produce_raw(settings, values + keys) == []
    # A null key is refused by the broker itself on a compacted topic: it never reaches a reader.
    assert produce_raw(settings, [(None, b"x", partition)]) == [
        "Broker: Broker failed to validate record"
    ]
    run_bad, all_bad = len(values) + 1, len(values) + len(keys)
    kafka = KafkaConnection(settings)

    replayed = replay_run(kafka, RUN)
    everything = replay_all(kafka)
    assert replayed.undecodable == run_bad
    assert everything.undecodable == all_bad
    assert everything.reasons == {  # the aggregator's dead-letter kinds
        "undecodable_value": 2,  # random bytes, truncated
        "empty_value": 1,
        "unknown_schema": 1,
        "unknown_format_version": 1,
        "bad_key": len(keys),
    }
    summary = bare(clean.summary)
    assert bare(replayed.summaries[RUN]) == bare(everything.summaries[RUN]) == summary
    assert expected(settings, RUN) == summary

    args = ["--run-id", RUN.run_id, "--benchmark", RUN.benchmark_id, "--model", MODEL, "--json"]
    env = child_env(settings)
    assert printed_json(run_cli(env, "status", *args))["undecodable"] == run_bad
    replay = run_cli(env, "replay", *args)
    assert bare(printed_json(replay)) == summary
    assert f"{run_bad} undecodable record(s) ignored" in replay.stderr

    with serving_aggregator(settings) as (aggregator, base_url):
        headers = [letter.headers for letter in dead_letters(settings, all_bad)]
        time.sleep(1.0)  # asserting an absence: a second letter of a record would be here by now
        assert message_count(settings, settings.dlq_topic) == all_bad, "more letters than records"
        metrics = httpx.get(base_url + "/metrics", timeout=5).text
        assert bare(httpx.get(base_url + path(RUN), timeout=5).json()) == summary
        assert httpx.get(base_url + "/healthz", timeout=5).status_code == 200
        assert aggregator.running
    kinds = Counter(h[HEADER_REASON_KIND] for h in headers)
    assert kinds == {
        "bad_key": len(keys),
        "undecodable_value": 2,
        "empty_value": 1,
        "unknown_schema": 1,
        "unknown_format_version": 1,
    }
    assert {kind: _metric(metrics, kind) for kind in kinds} == kinds
    offsets = Counter((h[HEADER_SOURCE_PARTITION], h[HEADER_SOURCE_OFFSET]) for h in headers)
    assert all(n == 1 for n in offsets.values()) and len(offsets) == all_bad
    assert all(h[HEADER_SOURCE_TOPIC] == settings.results_topic and h[HEADER_REASON]
               for h in headers)  # fmt: skip
    report(
        "hostile-records",
        bad=all_bad,
        replay_all=everything.undecodable,
        status=run_bad,
        dead_letters=len(headers),
        wrong_summaries=0,
    )
