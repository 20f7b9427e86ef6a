"""Rescore a run from the log: a new scorer over its stored answers, without the model.

`rescore_run` reads nothing itself: give it the source run's latest records
(`read_finished`, which waits for or refuses a run still being written) and a store; it
writes the rescored run through the store.
Inspect AI scorers (`inspect_ai.scorer:includes`) need the `inspect` extra.
"""

from resultlog.producer.rescore._answer import stored_answer
from resultlog.producer.rescore._errors import RescoreError
from resultlog.producer.rescore._grader import Grader
from resultlog.producer.rescore._rescore import (
    RescoreConfig,
    RescoreResult,
    rescore_config,
    rescore_run,
)
from resultlog.producer.rescore._scorer import BUILT_INS, RecordScorer, resolve_scorer
from resultlog.producer.rescore._source import SourceBusyError, read_finished

__all__ = [
    "BUILT_INS",
    "Grader",
    "RecordScorer",
    "RescoreConfig",
    "RescoreError",
    "RescoreResult",
    "SourceBusyError",
    "read_finished",
    "rescore_config",
    "rescore_run",
    "resolve_scorer",
    "stored_answer",
]
