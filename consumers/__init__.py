"""Readers of the log: the fold, resume, the aggregator service and replay."""

from resultlog.consumers._clients import LIBRDKAFKA_LOGGER, check_login
from resultlog.consumers._clients import client_config as with_logger
from resultlog.consumers._scan import partition_count
from resultlog.consumers.aggregator import Aggregator, AggregatorSettings
from resultlog.consumers.dlq import REASON_KINDS, DeadLetterWriter, reason_kind
from resultlog.consumers.errors import ConsumerError
from resultlog.consumers.fold import Contribution, RunFold, fold
from resultlog.consumers.purge import PurgeError, purge_run
from resultlog.consumers.replay import ReplayResult, replay_all, replay_run
from resultlog.consumers.resume import ResumeState, read_run_records, resume_state
from resultlog.consumers.summaries import publish_summaries

__all__ = [
    "LIBRDKAFKA_LOGGER",
    "REASON_KINDS",
    "Aggregator",
    "AggregatorSettings",
    "ConsumerError",
    "Contribution",
    "DeadLetterWriter",
    "PurgeError",
    "ReplayResult",
    "ResumeState",
    "RunFold",
    "check_login",
    "fold",
    "partition_count",
    "publish_summaries",
    "purge_run",
    "read_run_records",
    "reason_kind",
    "replay_all",
    "replay_run",
    "resume_state",
    "with_logger",
]
