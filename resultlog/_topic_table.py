"""resultlog's topics, each declared once: name, layout, configuration, roles and what it holds.

Topic creation (`resultlog.topics`), the layout checks of every client (`resultlog.kafka`),
the ACL roles (`resultlog.acl`) and the Kafka layout table of docs/design.md are all built
from `TOPICS`, so a topic added here is created, checked, granted and documented at once.
This module imports no Kafka client: `resultlog acl --help` and the docs build read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from resultlog.settings import Settings

__all__ = ["TOPICS", "Role", "Topic", "TopicOperation", "design_table"]

TopicOperation = Literal["READ", "WRITE"]


class Role(StrEnum):
    """A least-privilege role of `resultlog acl grant`."""

    WORKER = "worker"
    AGGREGATOR = "aggregator"
    VIEWER = "viewer"


_MINUTES_10 = str(10 * 60 * 1000)
# Leases are renewed every few seconds: short segments let compaction keep the topic small,
# so a claim (which reads the run key's partition) stays quick.
_LEASES_CONFIG = {
    "segment.ms": _MINUTES_10,
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": str(60 * 60 * 1000),
}
# The changelog keeps each store key's latest value: short segments let compaction keep it
# near the size of the state, so a restore reads little more than the state. Its tombstones
# stay as long as Kafka's default (a day), like the results topic's.
_CHANGELOG_CONFIG = {
    "segment.ms": _MINUTES_10,
    "segment.bytes": str(64 * 1024 * 1024),
    "min.cleanable.dirty.ratio": "0.1",
}
# Index entries are rewritten as their runs grow: a reader of one run reads its whole index
# partition, so small segments keep it near one entry per run.
_INDEX_CONFIG = {**_LEASES_CONFIG, "segment.bytes": str(8 * 1024 * 1024)}


@dataclass(frozen=True)
class Topic:
    """One of resultlog's topics, as the settings name it and as it must be laid out."""

    setting: str
    """The Settings field that names it (its default is the topic's default name)."""
    cleanup: Literal["compact", "delete"]
    key: str
    """What a message's key is (the docs' table)."""
    value: str
    """What a message's value is (the docs' table)."""
    partitions: Literal["partitions", "work_partitions"] = "partitions"
    """The Settings field giving its partition count."""
    checked: bool = True
    """Its partition count and cleanup policy are part of the contract: every client checks
    them, and a role that uses it may read its configuration. Unchecked topics may grow."""
    config: Mapping[str, str] = field(default_factory=dict)
    """Its own topic configuration, besides cleanup.policy and min.insync.replicas."""
    large: bool = False
    """It accepts messages up to the settings' `max_message_bytes`."""
    roles: Mapping[Role, tuple[TopicOperation, ...]] = field(default_factory=dict)
    """What each role may do with it."""
    partitions_note: str = ""
    """The docs' word on its partition count."""

    def name(self, settings: Settings) -> str:
        """The topic's name under `settings`."""
        return str(getattr(settings, self.setting))

    def partition_count(self, settings: Settings) -> int:
        """How many partitions `settings` give it."""
        return int(getattr(settings, self.partitions))


_BOTH: tuple[TopicOperation, ...] = ("WRITE", "READ")

TOPICS: tuple[Topic, ...] = (
    Topic(
        "results_topic",
        "compact",
        "`run_id/benchmark_id/model/sample_index/epoch`",
        "`SampleResult`",
        large=True,
        roles={Role.WORKER: _BOTH, Role.AGGREGATOR: ("READ",)},
        partitions_note="(contract)",
    ),
    Topic(
        "summaries_topic",
        "compact",
        "`run_id/benchmark_id/model`",
        "`RunSummary`",
        roles={Role.AGGREGATOR: ("WRITE",), Role.VIEWER: ("READ",)},
        partitions_note="(contract)",
    ),
    Topic(
        "dlq_topic",
        "delete",
        "the source key",
        "the source value, with `resultlog.*` headers",
        large=True,
        roles={Role.AGGREGATOR: ("WRITE",)},
    ),
    Topic(
        "leases_topic",
        "compact",
        "run key + holder",
        "a lease (holder, range, since, expiry)",
        config=_LEASES_CONFIG,
        roles={Role.WORKER: _BOTH},
    ),
    Topic(
        "spend_topic",
        "compact",
        "`run_id/benchmark_id/model/sample_index/epoch`",
        "a pair's spend ledger entry (JSON: reserved or settled, the key's spend, the "
        "reservation, holder, expiry); see [budgets](budgets.md#distributed-runs)",
        # Rewritten per pair, read per chunk: kept small like the leases.
        config=_LEASES_CONFIG,
        roles={Role.WORKER: _BOTH},
        partitions_note="(the results' partitioner)",
    ),
    Topic(
        "lm_eval_answers_topic",
        "compact",
        "`run_id/benchmark_id/model/a/<request key>` (a request's identity), or "
        "`run_id/benchmark_id/model/config`",
        "an answered lm-eval request (JSON: its type, the answer, its cost, the document asked "
        "for), or the configuration the answers were made under",
        large=True,
        roles={Role.WORKER: _BOTH},
        partitions_note="(the run key's results partition)",
    ),
    Topic(
        "changelog_topic",
        "compact",
        "a key of the aggregator's state store (a run's totals, a key's latest contribution, a "
        "sample's epochs), or the marker key `\\x00meta`",
        "the store's bytes for that key (null: deleted), or a flush's marker (JSON: the "
        "cluster, results topic ID, partition count, partition and the results offset the "
        "flush reflects)",
        config=_CHANGELOG_CONFIG,
        roles={Role.AGGREGATOR: _BOTH},
        partitions_note="(one per results partition)",
    ),
    Topic(
        "index_topic",
        "compact",
        "the run key's results prefix (`run_id/benchmark_id/model/`), or a marker key for the "
        'partition\'s "indexed through"',
        "`RunIndex` (`run_index.v2.avsc`): a run's offset intervals, or the marker's offset, "
        "naming the results topic's cluster and topic ID",
        config=_INDEX_CONFIG,
        roles={Role.WORKER: ("READ",), Role.AGGREGATOR: _BOTH},
        partitions_note="(one per results partition)",
    ),
    Topic(
        "work_topic",
        "delete",
        "`run_id/benchmark_id/model/chunk_index`",
        "`ChunkTask`",
        partitions="work_partitions",
        checked=False,
        roles={Role.WORKER: ("READ",)},
        partitions_note="(may grow)",
    ),
    Topic(
        "work_dlq_topic",
        "delete",
        "the task's key",
        "the task, with `resultlog.*` headers",
        partitions="work_partitions",
        checked=False,
        roles={Role.WORKER: ("WRITE",)},
    ),
)


def _segments(topic: Topic) -> str:
    """The docs' note on a compacted topic's segments, when it sets their size."""
    size = topic.config.get("segment.bytes")
    return f" ({int(size) // (1024 * 1024)} MB segments)" if size else ""


def design_table() -> str:
    """The Kafka layout table of docs/design.md."""
    from resultlog.settings import Settings

    defaults = Settings.model_fields
    rows = [
        "| topic (default name) | key | value | cleanup | partitions |",
        "| --- | --- | --- | --- | --- |",
    ]
    for topic in TOPICS:
        name = defaults[topic.setting].default
        count = f"`RESULTLOG_{topic.partitions.upper()}` {topic.partitions_note}".rstrip()
        cleanup = topic.cleanup + (_segments(topic) if topic.cleanup == "compact" else "")
        rows.append(f"| `{name}` | {topic.key} | {topic.value} | {cleanup} | {count} |")
    return "\n".join(rows) + "\n"
