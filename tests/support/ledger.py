"""The bill as tests read it: v1 bytes of a record, spend in /metrics, the summary table's rows."""

from __future__ import annotations

from io import BytesIO

import httpx
from fastavro import schemaless_reader, schemaless_writer
from prometheus_client.parser import text_string_to_metric_families

from resultlog.schemas import RunKey, SampleResult, shipped_catalog
from resultlog.schemas._catalog import SAMPLE_RESULT
from resultlog.settings import Settings
from tests.support.kafka import produce_raw, run_partition

SPENT_GAUGE = "resultlog_aggregator_run_spent_usd"


def v1_value(record: SampleResult) -> bytes:
    """The record as a schema v1 writer would have written it (single-object framing)."""
    catalog = shipped_catalog()
    v1, v2 = catalog.get(SAMPLE_RESULT, 1), catalog.get(SAMPLE_RESULT, 2)
    written = BytesIO()
    schemaless_writer(written, v2.parsed, record.model_dump())
    old = schemaless_reader(BytesIO(written.getvalue()), v2.parsed, v1.parsed)
    body = BytesIO()
    schemaless_writer(body, v1.parsed, old)
    return b"\xc3\x01" + v1.fingerprint + body.getvalue()


def rewrite_as_v1(settings: Settings, records: list[SampleResult]) -> None:
    """Write each record again, in schema v1 (no configuration, no ledger), over itself."""
    messages = [
        (record.key, v1_value(record), run_partition(settings, record.run_key))
        for record in records
    ]
    assert not produce_raw(settings, messages)


def spent_in_metrics(base_url: str) -> dict[RunKey, float]:
    """Each run's spend as the aggregator's /metrics says."""
    text = httpx.get(base_url + "/metrics", timeout=5).text
    spent: dict[RunKey, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == SPENT_GAUGE:
                labels = sample.labels
                run_key = RunKey(labels["run_id"], labels["benchmark_id"], labels["model"])
                spent[run_key] = sample.value
    return spent


def table_value(stdout: str, row: str) -> str:
    """The value of a row of the summary table `resultlog run` prints."""
    for line in stdout.splitlines():
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if len(cells) == 2 and cells[0] == row:
            return cells[1]
    raise AssertionError(f"no row {row!r} in:\n{stdout}")
