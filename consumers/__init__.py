"""Readers of the log: the fold, resume, replay, purge, summaries and the aggregator service.

The aggregator (with its HTTP API, prometheus_client, starlette and uvicorn) is imported
only when `resultlog.consumers.aggregator` or the name `Aggregator` is first used.
"""

from __future__ import annotations

# This folder is installed as resultlog.consumers (pyproject's package-dir); loading it under
# another name (the repository root on sys.path) would load every module a second time.
if __name__ != "resultlog.consumers":
    raise ImportError(
        f"import resultlog.consumers, not {__name__} (the folder consumers/ is resultlog.consumers)"
    )

from typing import TYPE_CHECKING, Any

from resultlog._hotpath import fold_path
from resultlog.consumers._scored import SCORER_PREFIX
from resultlog.consumers.errors import ConsumerError
from resultlog.consumers.fold import RunFold, fold
from resultlog.consumers.history import KeyHistory, read_key_histories
from resultlog.consumers.lease import (
    Lease,
    LeaseError,
    LeaseHeldError,
    LeaseLostError,
    RunLease,
    claim_lease,
    fence_lease,
    live_leases,
)
from resultlog.consumers.purge import (
    PurgeError,
    PurgeLeasedError,
    PurgePlan,
    execute_purge,
    plan_purge,
    purge_run,
)
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

if TYPE_CHECKING:
    from resultlog.consumers.aggregator import Aggregator

__all__ = [
    "SCORER_PREFIX",
    "Aggregator",
    "ConsumerError",
    "KeyHistory",
    "Lease",
    "LeaseError",
    "LeaseHeldError",
    "LeaseLostError",
    "LoadedViews",
    "PublishReport",
    "PurgeError",
    "PurgeLeasedError",
    "PurgePlan",
    "ReplayResult",
    "ResumeState",
    "RunFold",
    "RunLease",
    "RunRecords",
    "RunStatus",
    "SummaryPublisher",
    "claim_lease",
    "execute_purge",
    "fence_lease",
    "fold",
    "fold_path",
    "live_leases",
    "plan_purge",
    "publish_replayed",
    "purge_run",
    "read_key_histories",
    "read_run_records",
    "read_run_views",
    "replay_all",
    "replay_run",
    "resume_state",
    "run_keys_of",
    "run_status",
]


def __getattr__(name: str) -> Any:
    if name == "Aggregator":
        from resultlog.consumers.aggregator import Aggregator

        return Aggregator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
