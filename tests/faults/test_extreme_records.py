"""Records at and beyond the contract's bounds (design rule 9) against a real broker.

Records at every bound decode and fold; records beyond them (a metric of 1.7e308, a cost of
1e308, token counts and generation times of 2**62: valid Avro that stopped the aggregator,
replay and the worker before) are dead-lettered as `out_of_range`, counted, and stop nobody.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from io import BytesIO
from typing import Any

import httpx
import pytest
from fastavro import schemaless_writer

from resultlog.consumers import fold_records, replay_all, replay_run
from resultlog.kafka import KafkaConnection
from resultlog.producer.datasets import arith, limit_samples
from resultlog.producer.offline import ModelServer
from resultlog.schemas import (
    MAX_COST_USD,
    MAX_METRIC,
    MAX_MILLIS,
    MAX_TOKENS,
    Codec,
    RunKey,
    SampleResult,
    encode_key,
    shipped_catalog,
)
from resultlog.schemas.codec import SINGLE_OBJECT_MAGIC
from tests.support.aggregator import served, serving_aggregator
from tests.support.audit import report
from tests.support.cli import child_env, printed_json, run_cli
from tests.support.kafka import RawMessage, produce_raw, run_partition, topic_settings
from tests.support.records import USAGE_AT_BOUNDS, make_record
from tests.support.runs import MODEL, run_once
from tests.support.summaries import bare
from tests.support.waiting import wait_for

pytestmark = pytest.mark.faults

SAMPLES = 12
RUN = RunKey("extreme", "arith", MODEL)


def _at_bounds(sample_index: int) -> SampleResult:
    """A valid record with every summed number at its bound."""
    sign = 1 if sample_index % 2 else -1
    return make_record(
        sample_index,
        0,
        "C" if sample_index % 3 else "I",
        run_key=RUN,
        epochs=1,
        dataset_size=SAMPLES,
        # The built-in arith's id at that index: a resume reuses a record only where its
        # sample is.
        sample_id=f"arith-{sample_index:04d}",
        metrics={"reward": sign * MAX_METRIC},
        usage=USAGE_AT_BOUNDS,
        generation_time_ms=MAX_MILLIS,
        spent_cost=MAX_COST_USD,
    )


def _beyond(sample_index: int, field: str, value: Any) -> bytes:
    """Valid Avro (schema v2, single-object) of a record with one number beyond its bound."""
    datum = make_record(sample_index, 0, run_key=RUN, epochs=1, dataset_size=SAMPLES).model_dump()
    if field == "metric":
        datum["score"]["metrics"] = {"reward": value}
    elif field == "generation_time_ms":
        datum["generation_time_ms"] = value
    else:
        datum["usage"][field] = value
    schema = shipped_catalog().current("resultlog.SampleResult")
    body = BytesIO()
    schemaless_writer(body, schema.parsed, datum)
    return SINGLE_OBJECT_MAGIC + schema.fingerprint + body.getvalue()


BEYOND = [
    (6, "metric", 1.7e308),
    (7, "metric", 1.7e308),
    (8, "total_cost", 1e308),
    (9, "input_tokens", 2**62),
    (10, "generation_time_ms", 2**62),
]


def test_extreme_records_never_stop_a_reader(kafka_bootstrap: str) -> None:
    settings = topic_settings(kafka_bootstrap)
    kafka = KafkaConnection(settings)
    valid = [_at_bounds(i) for i in range(6)]
    home = run_partition(settings, RUN)
    messages: list[RawMessage] = [(r.key, Codec().encode_sample_result(r), home) for r in valid]
    messages += [(encode_key(RUN, i, 0), _beyond(i, field, v), home) for i, field, v in BEYOND]
    assert produce_raw(settings, messages) == []
    at_bounds = bare(fold_records(valid, RUN))
    assert at_bounds["usage"]["input_tokens"] == 6 * MAX_TOKENS

    replayed, everything = replay_run(kafka, RUN), replay_all(kafka)
    assert bare(replayed.summaries[RUN]) == bare(everything.summaries[RUN]) == at_bounds
    assert replayed.undecodable == everything.undecodable == len(BEYOND)
    assert everything.reasons == {"out_of_range": len(BEYOND)}

    args = ["--run-id", RUN.run_id, "--benchmark", RUN.benchmark_id, "--model", MODEL]
    env = child_env(settings)
    replay = run_cli(env, "replay", *args, "--json")
    assert bare(printed_json(replay)) == at_bounds
    assert f"{len(BEYOND)} undecodable record(s) ignored (out_of_range: {len(BEYOND)})" in (
        replay.stderr
    )
    assert run_cli(env, "replay", "--all", "--json").returncode == 0
    assert printed_json(run_cli(env, "status", *args, "--json"))["undecodable"] == len(BEYOND)

    with serving_aggregator(settings) as (aggregator, base_url):
        assert wait_for(lambda: served(base_url, RUN), "the run to be served") == at_bounds
        metrics = httpx.get(base_url + "/metrics", timeout=5).text
        assert f'dead_lettered_total{{reason="out_of_range"}} {float(len(BEYOND))}' in metrics

        # The worker resumes over the same records: it skips the valid ones, evaluates the
        # dead-lettered keys again and reports the run's summary, as replay does.
        with ModelServer(latency_s=0.0) as server:
            bench = limit_samples(arith(), SAMPLES)
            worked = asyncio.run(run_once(settings, bench, RUN.run_id, server.base_url, epochs=1))
        assert worked.skipped == len(valid) and worked.evaluated == SAMPLES - len(valid)
        final = bare(replay_run(kafka, RUN).summaries[RUN])
        assert bare(worked.summary) == final
        wait_for(lambda: served(base_url, RUN) == final, "the aggregator")
        assert aggregator.running
    kinds = Counter({"out_of_range": everything.reasons["out_of_range"]})
    report("extreme-records", beyond_bounds=len(BEYOND), dead_lettered=kinds["out_of_range"])
