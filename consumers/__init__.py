"""Readers of the log: the fold, resume, the aggregator service and replay."""

from consumers._clients import LIBRDKAFKA_LOGGER, check_login
from consumers._clients import client_config as with_logger
from consumers._scan import partition_count
from consumers.aggregator import Aggregator, AggregatorSettings
from consumers.dlq import REASON_KINDS, DeadLetterWriter, reason_kind
from consumers.errors import ConsumerError
from consumers.fold import Contribution, RunFold, fold
from consumers.purge import PurgeError, purge_run
from consumers.replay import ReplayResult, replay_all, replay_run
from consumers.resume import ResumeState, read_run_records, resume_state
from consumers.summaries import publish_summaries

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
