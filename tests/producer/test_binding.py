"""The shared result store bound to the results topic it opened, on a real broker: the store
every Python writer (run, chunk workers, the Inspect plugin, lm-eval, rescore) writes through."""

from __future__ import annotations

import asyncio

import pytest

from resultlog.kafka import KafkaConnection
from resultlog.producer import KafkaResultStore, TopicRecreatedError
from resultlog.settings import Settings
from tests.support.aggregator_process import recreate_results_topic
from tests.support.records import make_record


async def test_a_store_writes_and_closes_while_its_topic_stays(settings: Settings) -> None:
    """Writes over several checks of the topic's ID, then a clean close."""
    store = KafkaResultStore(KafkaConnection(settings))
    for i in range(3):
        await store.write(make_record(i, 0, "C"))
        await asyncio.sleep(1.5)
    await store.close()


async def test_a_recreated_topic_stops_every_write_and_the_close(settings: Settings) -> None:
    """One write, the topic re-created: the next write and the close raise one non-retriable
    line naming the topic and both IDs."""
    store = KafkaResultStore(KafkaConnection(settings))
    await store.write(make_record(0, 0, "C"))
    recreate_results_topic(settings)
    topic = settings.results_topic
    with pytest.raises(TopicRecreatedError) as raised:
        for i in range(1, 200):  # the watch looks every 2 s; each write waits for its ack
            await store.write(make_record(i, 0, "C"))
            await asyncio.sleep(0.05)
    message = str(raised.value)
    assert message.startswith(f"results topic {topic} was deleted"), message
    assert "\n" not in message and not raised.value.retriable
    with pytest.raises(TopicRecreatedError):
        await store.close()


async def test_the_close_notices_a_topic_recreated_after_the_last_write(
    settings: Settings,
) -> None:
    """Everything acknowledged by the old topic, which is then re-created: the close says so
    (what was written is gone with it)."""
    store = KafkaResultStore(KafkaConnection(settings))
    await store.write(make_record(0, 0, "C"))
    recreate_results_topic(settings)
    with pytest.raises(TopicRecreatedError, match="deleted and re-created under this write"):
        await store.close()
