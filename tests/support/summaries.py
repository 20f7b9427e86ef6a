"""Run summaries as the tests compare them: without freshness fields, from every reader."""

from __future__ import annotations

from typing import Any

from resultlog.consumers import fold_records, read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, RunSummary, decode_run_key
from resultlog.settings import Settings
from tests.support.kafka import read_topic

Summary = dict[str, Any]


def bare(summary: RunSummary | Summary) -> Summary:
    """A summary as JSON without its freshness fields."""
    data = summary.model_dump(mode="json") if isinstance(summary, RunSummary) else dict(summary)
    data.pop("as_of", None)
    return data


def expected(settings: Settings, run_key: RunKey) -> Summary:
    """The fold over the run key's latest records in the topic, without as_of."""
    with KafkaConnection(settings) as kafka:
        records = read_run_records(kafka, run_key).records
    return bare(fold_records(records, run_key))


def published(settings: Settings) -> dict[RunKey, Summary | None]:
    """The latest value per key on the summaries topic (None: a tombstone), without as_of."""
    latest: dict[RunKey, Summary | None] = {}
    with KafkaConnection(settings) as kafka:
        for message in read_topic(settings, kafka.summaries_topic):
            assert message.key is not None, message
            value = message.value
            summary = None if value is None else bare(kafka.codec.decode_run_summary(value))
            latest[decode_run_key(message.key)] = summary
    return latest


def converged(settings: Settings, want: dict[RunKey, Summary]) -> bool:
    """Whether the summaries topic holds exactly `want` for those run keys."""
    latest = published(settings)
    return all(latest.get(run_key) == summary for run_key, summary in want.items())
