"""The distributed worker's plumbing: planning, submitting, the group loop, dead letters."""

from resultlog.producer._worker._dead import CHUNK_FAILED, HEADER_ATTEMPTS
from resultlog.producer._worker._loop import Worker, WorkerOptions, WorkerReport
from resultlog.producer._worker._plan import (
    RunSpec,
    WorkError,
    dataset_sha256,
    plan_chunks,
    task_benchmark,
)
from resultlog.producer._worker._submit import submit_chunks

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
