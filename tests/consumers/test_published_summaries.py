"""The summaries topic's value of a run not held fresh here, on a real broker: read on demand
per partition, kept current, tombstones honoured, idle partitions let go; and the API serving
it marked stale where the aggregator holds nothing."""

from __future__ import annotations

import httpx

from resultlog.consumers import fold_records
from resultlog.consumers.aggregator import Aggregator, HttpServer, create_app
from resultlog.consumers.aggregator.web._published import PublishedSummaries
from resultlog.consumers.summaries import SummaryPublisher
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, RunSummary, partition_for
from resultlog.settings import Settings
from tests.support.aggregator import path
from tests.support.records import make_record
from tests.support.summaries import bare

RUN = RunKey("published-1", "arith", "openai/gpt-4o")
OTHER = RunKey("published-2", "arith", "openai/gpt-4o")


def _summary(run_key: RunKey, records: int) -> RunSummary:
    return fold_records(
        [make_record(i, 0, "C" if i % 3 else "I", run_key=run_key) for i in range(records)]
    )


def _publish(kafka: KafkaConnection, *pending: tuple[RunKey, RunSummary | None]) -> None:
    publisher = SummaryPublisher(kafka)
    publisher.publish(pending)
    assert publisher.flush(30) == 0


def test_the_latest_value_is_read_to_the_end_and_kept_current(settings: Settings) -> None:
    """A run's latest summary; a later one once published; None after its tombstone, and
    for a run never published."""
    kafka = KafkaConnection(settings)
    partition = partition_for(RUN, settings.partitions)
    _publish(kafka, (RUN, _summary(RUN, 3)), (RUN, _summary(RUN, 5)))
    published = PublishedSummaries(kafka)
    try:
        found = published.summary(RUN)
        assert found is not None and bare(found) == bare(_summary(RUN, 5))
        assert published.summary(OTHER) is None
        _publish(kafka, (RUN, _summary(RUN, 7)))
        found = published.summary(RUN)
        assert found is not None and found.records == 7
        _publish(kafka, (RUN, None))
        assert published.summary(RUN) is None
        asked = {partition, partition_for(OTHER, settings.partitions)}
        assert set(published._values) == asked, "only the partitions asked for are read"
    finally:
        published.close()


def test_a_partition_not_asked_for_is_let_go(settings: Settings) -> None:
    """With no idle time, asking for one partition forgets the others, which are read again
    when asked for."""
    kafka = KafkaConnection(settings)
    runs = {partition_for(RunKey(f"p{i}", "arith", "m"), settings.partitions): i for i in range(40)}
    assert len(runs) >= 2
    (first, i), (second, j) = list(runs.items())[:2]
    keys = {first: RunKey(f"p{i}", "arith", "m"), second: RunKey(f"p{j}", "arith", "m")}
    _publish(kafka, *((k, _summary(k, 2)) for k in keys.values()))
    published = PublishedSummaries(kafka, idle_s=0.0)
    try:
        assert published.summary(keys[first]) is not None
        assert published.summary(keys[second]) is not None
        assert set(published._values) == {second}  # the first one was let go
        found = published.summary(keys[first])
        assert found is not None and found.records == 2
    finally:
        published.close()


def test_the_api_serves_a_run_it_does_not_hold_marked_stale(settings: Settings) -> None:
    """An aggregator that holds no partition (not started): a published run is served from
    the summaries topic with `"stale": true`; an unknown one is still 404."""
    kafka = KafkaConnection(settings)
    _publish(kafka, (RUN, _summary(RUN, 4)))
    idle = Aggregator(kafka)
    server = HttpServer(create_app(idle, kafka=kafka), "127.0.0.1", 0)
    server.start_in_thread()
    try:
        response = httpx.get(server.url + path(RUN), timeout=10)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body.pop("stale") is True and bare(body) == bare(_summary(RUN, 4))
        assert httpx.get(server.url + path(OTHER), timeout=10).status_code == 404
        page = httpx.get(server.url + "/parts/run" + path(RUN)[len("/runs") :], timeout=10)
        assert page.status_code == 200 and 'class="badge stale"' in page.text, page.text[-500:]
    finally:
        server.close()
