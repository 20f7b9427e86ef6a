"""Readers of the log: the fold, resume, the aggregator service and replay."""

from consumers._clients import LIBRDKAFKA_LOGGER
from consumers._clients import client_config as with_logger
from consumers.errors import ConsumerError
from consumers.fold import Contribution, RunFold, fold
from consumers.replay import ReplayResult, replay_all, replay_run
from consumers.resume import ResumeState, read_run_records, resume_state
from consumers.summaries import publish_summaries

__all__ = [
    "LIBRDKAFKA_LOGGER",
    "ConsumerError",
    "Contribution",
    "ReplayResult",
    "ResumeState",
    "RunFold",
    "fold",
    "publish_summaries",
    "read_run_records",
    "replay_all",
    "replay_run",
    "resume_state",
    "with_logger",
]
