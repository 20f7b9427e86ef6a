"""The one summary publisher: what `replay --publish` and the aggregator write."""

from __future__ import annotations

from resultlog.consumers import SummaryPublisher, fold_records
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.records import make_record
from tests.support.summaries import bare, published


def test_publish_all_writes_every_summary_and_tombstones_delete_them(
    settings: Settings, kafka: KafkaConnection
) -> None:
    runs = [RunKey(f"pub-{i}", "arith", "m") for i in range(5)]
    summaries = [
        fold_records([make_record(0, 0, run_key=k), make_record(1, 0, run_key=k)]) for k in runs
    ]
    publisher = SummaryPublisher(kafka)
    assert publisher.publish_all(summaries) == len(runs)
    assert published(settings) == {s.run_key: bare(s) for s in summaries}

    publisher.publish([(runs[0], None)])
    assert publisher.flush(30) == 0 and publisher.take_failed() == []
    assert published(settings)[runs[0]] is None
