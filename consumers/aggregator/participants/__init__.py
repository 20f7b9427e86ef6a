"""What the aggregator's consumer loop drives besides its ingest step: participants, each with
one `poll(now)` and told of the partitions' life (`_base`). Adding one never touches the loop's
pass, only the list `_loop` builds.

Adapters here keep the shared classes (`consumers/summaries.py`, `consumers/dlq.py`) as they
are for their other users.
"""

from resultlog.consumers.aggregator.participants._base import (
    Adoption,
    Bounds,
    Participant,
    Revocation,
    Why,
    overriding,
    positions,
)
from resultlog.consumers.aggregator.participants._dead_letters import DeadLetters
from resultlog.consumers.aggregator.participants._publication import (
    Publication,
    summary_publisher,
)
from resultlog.consumers.aggregator.participants._reconciliation import Reconciliation
from resultlog.consumers.aggregator.participants._run_index import RunIndex
from resultlog.consumers.aggregator.participants._store_flush import StoreFlush
from resultlog.consumers.aggregator.participants._topic_watch import TopicWatch

__all__ = [
    "Adoption",
    "Bounds",
    "DeadLetters",
    "Participant",
    "Publication",
    "Reconciliation",
    "Revocation",
    "RunIndex",
    "StoreFlush",
    "TopicWatch",
    "Why",
    "overriding",
    "positions",
    "summary_publisher",
]
