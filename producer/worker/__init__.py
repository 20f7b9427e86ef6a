"""Distributed workers: a run's chunk tasks on the work topic, run by a consumer group.

`plan_chunks` splits a run into ChunkTasks and `submit_chunks` writes them (`resultlog
submit`); a `ChunkWorker` is one member of the group running them (`resultlog worker`).
"""

from resultlog.producer.worker._dead import CHUNK_FAILED, HEADER_ATTEMPTS
from resultlog.producer.worker._loop import ChunkWorker, WorkerOptions, WorkerReport
from resultlog.producer.worker._plan import (
    RunSpec,
    WorkError,
    dataset_sha256,
    plan_chunks,
    task_benchmark,
)
from resultlog.producer.worker._submit import submit_chunks

__all__ = [
    "CHUNK_FAILED",
    "HEADER_ATTEMPTS",
    "ChunkWorker",
    "RunSpec",
    "WorkError",
    "WorkerOptions",
    "WorkerReport",
    "dataset_sha256",
    "plan_chunks",
    "submit_chunks",
    "task_benchmark",
]
