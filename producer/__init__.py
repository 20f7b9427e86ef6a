"""What a harness worker runs: result stores, request context, model client, runner, and
the other writers of the log: leases on run keys and purge."""

# This folder is installed as resultlog.producer (pyproject's package-dir); loading it under
# another name (the repository root on sys.path) would load every module a second time.
if __name__ != "resultlog.producer":
    raise ImportError(
        f"import resultlog.producer, not {__name__} (the folder producer/ is resultlog.producer)"
    )

from typing import TYPE_CHECKING

from resultlog._lazy import lazy_exports

# Each name is imported where it is first used (resultlog._lazy): these imports say from where.
if TYPE_CHECKING:
    from resultlog.producer._config import ConfigChangedError, RunConfig, check_config, run_config
    from resultlog.producer.context import SampleContext, current_sample, sample_scope
    from resultlog.producer.datasets import (
        Benchmark,
        Sample,
        StaticBenchmark,
        arith,
        load_jsonl,
        resolve_benchmark,
    )
    from resultlog.producer.errors import (
        BenchmarkError,
        ModelError,
        PersistenceError,
        ProducerError,
        SolverError,
        TopicRecreatedError,
        UnansweredError,
    )
    from resultlog.producer.lease import (
        Lease,
        LeaseError,
        LeaseHeldError,
        LeaseLostError,
        RunLease,
        claim_lease,
        fence_lease,
        live_leases,
    )
    from resultlog.producer.model_client import Completion, ModelClient
    from resultlog.producer.purge import (
        PurgeError,
        PurgeLeasedError,
        PurgePlan,
        execute_purge,
        plan_purge,
        purge_run,
    )
    from resultlog.producer.runner import (
        Progress,
        RunBudget,
        RunOptions,
        RunResult,
        Solver,
        config_solver,
        model_solver,
        run_benchmark,
    )
    from resultlog.producer.store import KafkaResultStore, NoopResultStore, ResultStore

__all__ = [
    "Benchmark",
    "BenchmarkError",
    "Completion",
    "ConfigChangedError",
    "KafkaResultStore",
    "Lease",
    "LeaseError",
    "LeaseHeldError",
    "LeaseLostError",
    "ModelClient",
    "ModelError",
    "NoopResultStore",
    "PersistenceError",
    "ProducerError",
    "Progress",
    "PurgeError",
    "PurgeLeasedError",
    "PurgePlan",
    "ResultStore",
    "RunBudget",
    "RunConfig",
    "RunLease",
    "RunOptions",
    "RunResult",
    "Sample",
    "SampleContext",
    "Solver",
    "SolverError",
    "StaticBenchmark",
    "TopicRecreatedError",
    "UnansweredError",
    "arith",
    "check_config",
    "claim_lease",
    "config_solver",
    "current_sample",
    "execute_purge",
    "fence_lease",
    "live_leases",
    "load_jsonl",
    "model_solver",
    "plan_purge",
    "purge_run",
    "resolve_benchmark",
    "run_benchmark",
    "run_config",
    "sample_scope",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
