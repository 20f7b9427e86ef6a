"""`resultlog inspect resume`: rebuild an eval's Inspect logs from the topic, then eval-retry."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from inspect_ai import eval_retry
from inspect_ai.log import EvalLog
from inspect_ai.util import LimitExceededError

from resultlog.consumers import read_run_records, replay_run, run_keys_of
from resultlog.kafka import KafkaConnection
from resultlog.producer.inspect._errors import InspectPluginError
from resultlog.producer.inspect._eval_tasks import EvalTask
from resultlog.producer.inspect._hooks import ENABLE_ENV, refusing
from resultlog.producer.inspect._rebuild import RebuiltLog, rebuild_log, rebuild_unstarted
from resultlog.producer.inspect._task import RUN_ID_ENV
from resultlog.schemas import RunKey

__all__ = ["ResumedTask", "resume_eval"]


@dataclass(frozen=True)
class ResumedTask:
    """One task of a resumed eval: what the log gave back and how Inspect's retry ended."""

    run_key: RunKey
    reused: int  # (sample, epoch) pairs taken from the results log, not asked again
    expected: int  # the task's pairs
    status: str  # Inspect's log status: "success", "error", "cancelled"...
    location: str  # Inspect's new log
    metrics: dict[str, float] = field(default_factory=dict)  # "scorer/metric" -> value
    error: str | None = None
    tokens: int = 0  # the run key's tokens, every durable pair's (what replay says)
    session_tokens: int = 0  # the tokens of this resume's model calls (what Inspect shows)

    @property
    def succeeded(self) -> bool:
        """True when Inspect's log of the task says success."""
        return self.status == "success"


def resume_eval(
    kafka: KafkaConnection,
    run_id: str,
    *,
    log_dir: str,
    task_file: str | None = None,
    accept_config_change: bool = False,
) -> list[ResumedTask]:
    """Continue every task of run `run_id` from its durable records, asking none of them again.

    Tasks of the eval that made no durable record run too (the records remember every task
    of the eval). Records of another configuration than a task's newest stop the resume
    before any model call (ConfigChangedError) unless `accept_config_change`. The hooks of
    this process publish what the retry evaluates; they read the same RESULTLOG_* settings
    as `kafka` was made from.
    """
    run_keys = run_keys_of(kafka, run_id)
    if not run_keys:
        raise InspectPluginError(
            f"run {run_id!r} has no records in {kafka.results_topic}; "
            "nothing to resume (run the eval again)"
        )
    rebuilt = [
        rebuild_log(
            key,
            read_run_records(kafka, key).records,
            log_dir,
            task_file,
            accept_config_change=accept_config_change,
        )
        for key in run_keys
    ]
    rebuilt += _unstarted(run_id, rebuilt, log_dir)
    environment = {RUN_ID_ENV: run_id, ENABLE_ENV: kafka.servers}
    durable = {log.run_key: log.reused for log in rebuilt}
    keys = {log.spec.task_id: log.run_key for log in rebuilt}
    configs = {} if accept_config_change else _configs(rebuilt)
    with _environment(environment), refusing(durable, keys, configs):
        try:
            logs = eval_retry([log.path for log in rebuilt], log_dir=log_dir)
        except LimitExceededError as exc:  # raised by our hooks when a publish failed
            raise InspectPluginError(str(exc).removeprefix("resultlog: ")) from exc
        except Exception as exc:  # Inspect's own: a missing API key, a broken task file...
            raise InspectPluginError(f"Inspect's eval-retry failed: {exc}") from exc
    return [
        _resumed(log, eval_log, _run_tokens(kafka, log.run_key))
        for log, eval_log in zip(rebuilt, logs, strict=True)
    ]


def _run_tokens(kafka: KafkaConnection, run_key: RunKey) -> int:
    """The run key's tokens over its durable records, as replay counts them."""
    return replay_run(kafka, run_key).summaries[run_key].usage.total_tokens


def _configs(rebuilt: list[RebuiltLog]) -> dict[RunKey, str]:
    """The configuration each run key's durable records hold (its newest record's)."""
    return {log.run_key: log.config for log in rebuilt if log.config is not None}


def _unstarted(run_id: str, rebuilt: list[RebuiltLog], log_dir: str) -> list[RebuiltLog]:
    """Empty logs of the eval's tasks that have no record yet (named by any record's payload)."""
    have = {log.run_key for log in rebuilt}
    missing: dict[RunKey, tuple[EvalTask, RebuiltLog]] = {}
    for log in rebuilt:
        for task in log.tasks:
            key = RunKey(run_id, task.benchmark_id, task.model)
            if key not in have:
                missing.setdefault(key, (task, log))
    return [rebuild_unstarted(key, task, log, log_dir) for key, (task, log) in missing.items()]


def _resumed(rebuilt: RebuiltLog, log: EvalLog, tokens: int) -> ResumedTask:
    metrics = {
        f"{score.name}/{name}": metric.value
        for score in (log.results.scores if log.results else [])
        for name, metric in score.metrics.items()
    }
    samples = log.eval.dataset.sample_ids or ()
    epochs = log.eval.config.epochs or 1
    return ResumedTask(
        run_key=rebuilt.run_key,
        reused=len(rebuilt.reused),
        expected=rebuilt.expected or len(samples) * epochs,
        status=log.status,
        location=log.location,
        metrics=metrics,
        error=log.error.message if log.error else None,
        tokens=tokens,
        session_tokens=sum(usage.total_tokens for usage in log.stats.model_usage.values()),
    )


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
