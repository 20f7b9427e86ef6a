"""Readers of the log: the fold, resume, the aggregator service and replay."""

from consumers._clients import LIBRDKAFKA_LOGGER
from consumers._clients import client_config as with_logger
from consumers.errors import ConsumerError
from consumers.fold import Contribution, RunFold, fold
from consumers.resume import ResumeState, read_run_records, resume_state

__all__ = [
    "LIBRDKAFKA_LOGGER",
    "ConsumerError",
    "Contribution",
    "ResumeState",
    "RunFold",
    "fold",
    "read_run_records",
    "resume_state",
    "with_logger",
]
