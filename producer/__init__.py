"""What a harness worker runs: result stores, request context, model client, runner."""

from producer._limited import limit_samples
from producer._retry import WritePolicy
from producer.benchmarks import (
    Benchmark,
    Sample,
    StaticBenchmark,
    arith,
    load_jsonl,
    resolve_benchmark,
)
from producer.context import SampleContext, current_sample, sample_scope
from producer.errors import (
    BenchmarkError,
    ModelError,
    PersistenceError,
    ProducerError,
    SolverError,
)
from producer.model_client import Completion, ModelClient, classify_model_error
from producer.model_server import Behavior, ModelServer
from producer.runner import Progress, RunResult, Solver, model_solver, run_benchmark
from producer.store import KafkaResultStore, NoopResultStore, ResultStore

__all__ = [
    "Behavior",
    "Benchmark",
    "BenchmarkError",
    "Completion",
    "KafkaResultStore",
    "ModelClient",
    "ModelError",
    "ModelServer",
    "NoopResultStore",
    "PersistenceError",
    "ProducerError",
    "Progress",
    "ResultStore",
    "RunResult",
    "Sample",
    "SampleContext",
    "Solver",
    "SolverError",
    "StaticBenchmark",
    "WritePolicy",
    "arith",
    "classify_model_error",
    "current_sample",
    "limit_samples",
    "load_jsonl",
    "model_solver",
    "resolve_benchmark",
    "run_benchmark",
    "sample_scope",
]
