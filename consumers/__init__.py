"""Readers of the log: the fold, resume, the aggregator service and replay."""

from resultlog.consumers.aggregator import Aggregator
from resultlog.consumers.dlq import REASON_KINDS, DeadLetterWriter, reason_kind
from resultlog.consumers.errors import ConsumerError
from resultlog.consumers.fold import Contribution, RunFold, fold
from resultlog.consumers.purge import PurgeError, purge_run
from resultlog.consumers.replay import ReplayResult, replay_all, replay_run
from resultlog.consumers.resume import ResumeState, RunRecords, read_run_records, resume_state
from resultlog.consumers.summaries import SummaryPublisher

__all__ = [
    "REASON_KINDS",
    "Aggregator",
    "ConsumerError",
    "Contribution",
    "DeadLetterWriter",
    "PurgeError",
    "ReplayResult",
    "ResumeState",
    "RunFold",
    "RunRecords",
    "SummaryPublisher",
    "fold",
    "purge_run",
    "read_run_records",
    "reason_kind",
    "replay_all",
    "replay_run",
    "resume_state",
]
