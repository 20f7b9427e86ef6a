"""Readers of the log: the fold, resume, replay, summaries and the aggregator service.

Each name's module is imported when the name is first used: the aggregator (with its HTTP
API, prometheus_client, starlette and uvicorn) only by a reader of `Aggregator`.
"""

from __future__ import annotations

# This folder is installed as resultlog.consumers (pyproject's package-dir); loading it under
# another name (the repository root on sys.path) would load every module a second time.
if __name__ != "resultlog.consumers":
    raise ImportError(
        f"import resultlog.consumers, not {__name__} (the folder consumers/ is resultlog.consumers)"
    )

from typing import TYPE_CHECKING

from resultlog._hotpath import fold_path
from resultlog._lazy import lazy_exports

# Each name is imported where it is first used (resultlog._lazy): these imports say from where.
if TYPE_CHECKING:
    from resultlog.consumers._samples import Comparison, RunSamples
    from resultlog.consumers._scored import SCORER_PREFIX
    from resultlog.consumers.aggregator import Aggregator
    from resultlog.consumers.errors import ConsumerError
    from resultlog.consumers.fold import RunFold, fold_records
    from resultlog.consumers.history import KeyHistory, read_key_histories
    from resultlog.consumers.replay import (
        PublishReport,
        ReplayResult,
        publish_replayed,
        replay_all,
        replay_run,
    )
    from resultlog.consumers.resume import (
        LoadedViews,
        ResumeState,
        RunRecords,
        RunStatus,
        read_run_records,
        read_run_views,
        resume_state,
        run_keys_of,
        run_status,
    )
    from resultlog.consumers.summaries import SummaryPublisher

__all__ = [
    "SCORER_PREFIX",
    "Aggregator",
    "Comparison",
    "ConsumerError",
    "KeyHistory",
    "LoadedViews",
    "PublishReport",
    "ReplayResult",
    "ResumeState",
    "RunFold",
    "RunRecords",
    "RunSamples",
    "RunStatus",
    "SummaryPublisher",
    "fold_path",
    "fold_records",
    "publish_replayed",
    "read_key_histories",
    "read_run_records",
    "read_run_views",
    "replay_all",
    "replay_run",
    "resume_state",
    "run_keys_of",
    "run_status",
]


__getattr__, __dir__ = lazy_exports(__name__, __file__)
