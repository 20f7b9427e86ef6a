"""Distributed workers: a run's chunk tasks on the work topic, run by a consumer group.

`plan_chunks` splits a run into ChunkTasks and `submit_chunks` writes them (`resultlog
submit`); a `Worker` is one member of the group running them (`resultlog worker`).
"""

from resultlog.producer._worker import (
    CHUNK_FAILED,
    HEADER_ATTEMPTS,
    RunSpec,
    Worker,
    WorkerOptions,
    WorkerReport,
    WorkError,
    dataset_sha256,
    plan_chunks,
    submit_chunks,
    task_benchmark,
)

__all__ = [
    "CHUNK_FAILED",
    "HEADER_ATTEMPTS",
    "RunSpec",
    "WorkError",
    "Worker",
    "WorkerOptions",
    "WorkerReport",
    "dataset_sha256",
    "plan_chunks",
    "submit_chunks",
    "task_benchmark",
]
