"""The group member's parts the consumer thread's pieces share."""

from __future__ import annotations

from typing import NamedTuple

from confluent_kafka import Consumer

from resultlog.consumers.aggregator._metrics import AggregatorMetrics
from resultlog.consumers.aggregator._state import Shared
from resultlog.kafka import KafkaConnection

__all__ = ["Member"]


class Member(NamedTuple):
    """A joined member of the aggregators' group: its connection, the state it shares with
    the readers, its metrics and its group consumer."""

    kafka: KafkaConnection
    shared: Shared
    metrics: AggregatorMetrics
    consumer: Consumer
