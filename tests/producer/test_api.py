"""The producer's public surface: the worker's domain API, the offline model apart."""

from __future__ import annotations

import argparse
from pathlib import Path

from resultlog import producer
from resultlog.producer import offline
from tests.support.imports import modules_loaded_by

WORKER_API = {
    # result stores
    "KafkaResultStore",
    "NoopResultStore",
    "ResultStore",
    # request context
    "SampleContext",
    "current_sample",
    "sample_scope",
    # model client
    "Completion",
    "ModelClient",
    # runner
    "Progress",
    "RunResult",
    "RunOptions",
    "RunBudget",
    "Solver",
    "model_solver",
    "config_solver",
    "run_benchmark",
    # the run's configuration (design rule 10)
    "RunConfig",
    "run_config",
    "check_config",
    "ConfigChangedError",
    # leases on run keys (design rule 18), the writers' own
    "Lease",
    "LeaseError",
    "LeaseHeldError",
    "LeaseLostError",
    "RunLease",
    "claim_lease",
    "fence_lease",
    "live_leases",
    # purge: tombstones for a run's keys
    "PurgeError",
    "PurgeLeasedError",
    "PurgePlan",
    "execute_purge",
    "plan_purge",
    "purge_run",
    # benchmarks
    "Benchmark",
    "Sample",
    "StaticBenchmark",
    "arith",
    "load_jsonl",
    "resolve_benchmark",
    # errors
    "BenchmarkError",
    "ModelError",
    "PersistenceError",
    "ProducerError",
    "SolverError",
    "TopicRecreatedError",
    "UnansweredError",
}


OFFLINE_API = {
    # the server and how it answers
    "ModelServer",
    "Behavior",
    "Fault",
    "LoggedRequest",
    # the outcomes it decides by hash
    "Outcome",
    "expected_outcome",
    "generation_id",
    "is_expected_degraded",
    # `resultlog model-server`
    "add_arguments",
    "serve",
}


def test_the_package_exports_the_worker_api_and_nothing_else() -> None:
    assert set(producer.__all__) == WORKER_API


def test_the_offline_model_exports_the_server_its_behaviours_and_the_cli_hooks() -> None:
    assert set(offline.__all__) == OFFLINE_API
    assert not OFFLINE_API & WORKER_API
    parser = argparse.ArgumentParser()
    offline.add_arguments(parser)
    options = parser.parse_args(["--port-file", "p", "--request-log", "r", "--latency-ms", "50"])
    assert (options.port_file, options.request_log) == (Path("p"), Path("r"))
    assert options.latency_ms == 50
    assert (options.host, options.port) == ("127.0.0.1", 0)


def test_importing_the_producer_loads_neither_the_offline_model_nor_h11() -> None:
    loaded = modules_loaded_by("resultlog.producer", exports=True)
    assert "resultlog.producer" in loaded
    assert {m for m in loaded if m == "h11" or m.startswith("resultlog.producer.offline")} == set()
