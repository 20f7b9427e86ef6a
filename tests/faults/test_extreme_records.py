"""Records at and beyond the contract's bounds (DESIGN rule 9) against a real broker.

Records at every bound decode and fold; records beyond them (a metric of 1.7e308, a cost of
1e308, token counts and generation times of 2**62: valid Avro that stopped the aggregator,
replay and the worker before) are dead-lettered as `out_of_range`, counted, and stop nobody.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from io import BytesIO
from typing import Any

import httpx
import pytest
from fastavro import schemaless_writer

from resultlog.consumers import fold, replay_all, replay_run
from resultlog.kafka import KafkaConnection
from resultlog.producer.offline import ModelServer
from resultlog.schemas import (
    MAX_COST_USD,
    MAX_METRIC,
    MAX_MILLIS,
    MAX_TOKENS,
    Codec,
    RunKey,
    SampleResult,
    Usage,
    encode_key,
    partition_for,
    shipped_catalog,
)
from resultlog.schemas.codec import SINGLE_OBJECT_MAGIC
from tests.consumers.support import bare, path
from tests.factories import make_record
from tests.faults.conftest import make_settings
from tests.faults.support import (
    MODEL,
    cli,
    produce_raw,
    report,
    run_once,
    serving_aggregator,
    small_bench,
    wait_for,
)

pytestmark = pytest.mark.faults

SAMPLES = 12
RUN = RunKey("extreme", "arith", MODEL)
_AT_BOUNDS = Usage(
    input_tokens=MAX_TOKENS,
    output_tokens=MAX_TOKENS,
    total_tokens=MAX_TOKENS,
    reasoning_tokens=MAX_TOKENS,
    total_cost=MAX_COST_USD,
)


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
        metrics={"reward": sign * MAX_METRIC},
        usage=_AT_BOUNDS,
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
    settings = make_settings(kafka_bootstrap)
    kafka = KafkaConnection(settings)
    valid = [_at_bounds(i) for i in range(6)]
    messages: list[tuple[bytes | None, bytes | None]] = [
        (r.key, Codec().encode_sample_result(r)) for r in valid
    ]
    messages += [(encode_key(RUN, i, 0), _beyond(i, field, v)) for i, field, v in BEYOND]
    assert produce_raw(settings, messages, partition_for(RUN, settings.partitions)) == []
    at_bounds = bare(fold(valid, RUN))
    assert at_bounds["usage"]["input_tokens"] == 6 * MAX_TOKENS

    replayed, everything = replay_run(kafka, RUN), replay_all(kafka)
    assert bare(replayed.summaries[RUN]) == bare(everything.summaries[RUN]) == at_bounds
    assert replayed.undecodable == everything.undecodable == len(BEYOND)
    assert everything.reasons == {"out_of_range": len(BEYOND)}

    args = ["--run-id", RUN.run_id, "--benchmark", RUN.benchmark_id, "--model", MODEL]
    replay = cli(settings, "replay", *args, "--json")
    assert replay.returncode == 0, replay.stderr
    assert bare(json.loads(replay.stdout)) == at_bounds
    assert f"{len(BEYOND)} undecodable record(s) ignored (out_of_range: {len(BEYOND)})" in (
        replay.stderr
    )
    assert cli(settings, "replay", "--all", "--json").returncode == 0
    status = cli(settings, "status", *args, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["undecodable"] == len(BEYOND)

    with serving_aggregator(settings) as (aggregator, base_url):
        served = wait_for(lambda: _served(base_url), "the run to be served")
        assert bare(served) == at_bounds
        metrics = httpx.get(base_url + "/metrics", timeout=5).text
        assert f'dead_lettered_total{{reason="out_of_range"}} {float(len(BEYOND))}' in metrics

        # The worker resumes over the same records: it skips the valid ones, evaluates the
        # dead-lettered keys again and reports the run's summary, as replay does.
        with ModelServer(latency_s=0.0) as server:
            worked = asyncio.run(
                run_once(settings, small_bench(SAMPLES), RUN.run_id, server.base_url, epochs=1)
            )
        assert worked.skipped == len(valid) and worked.evaluated == SAMPLES - len(valid)
        final = bare(replay_run(kafka, RUN).summaries[RUN])
        assert bare(worked.summary) == final
        wait_for(lambda: bare(_served(base_url) or {}) == final or None, "the aggregator")
        assert aggregator.running
    kinds = Counter({"out_of_range": everything.reasons["out_of_range"]})
    report("extreme-records", beyond_bounds=len(BEYOND), dead_lettered=kinds["out_of_range"])


def _served(base_url: str) -> dict[str, Any] | None:
    response = httpx.get(base_url + path(RUN), timeout=5)
    return response.json() if response.status_code == 200 else None
