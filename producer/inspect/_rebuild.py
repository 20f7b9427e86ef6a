"""Rebuild an Inspect eval log from one run key's records (public inspect_ai.log APIs only)."""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from inspect_ai.log import (
    EvalDataset,
    EvalError,
    EvalLog,
    EvalPlan,
    EvalSample,
    EvalSpec,
    EvalStats,
    write_eval_log,
)

from resultlog.consumers import ResumeState
from resultlog.producer._config import ConfigChangedError, differences
from resultlog.producer.inspect._errors import InspectPluginError
from resultlog.producer.inspect._eval_tasks import EvalTask
from resultlog.producer.inspect._payload import StoredSample, decode
from resultlog.schemas import RunKey, SampleResult

__all__ = ["RebuiltLog", "rebuild_log", "rebuild_unstarted"]

_HARNESS = "inspect_ai"


@dataclass(frozen=True)
class RebuiltLog:
    """An Inspect log written from the results log: where, and which pairs it holds."""

    run_key: RunKey
    path: str
    reused: frozenset[tuple[str, int]]  # (sample id, 0-based epoch) of every stored sample
    expected: int  # the task's (sample, epoch) pairs
    spec: EvalSpec
    plan: EvalPlan
    tasks: list[EvalTask] = field(default_factory=list)  # every task of the eval, if known
    config: str | None = None  # the configuration of its newest record (what the resume uses)


def rebuild_log(
    run_key: RunKey,
    records: list[SampleResult],
    log_dir: str,
    task_file: str | None = None,
    *,
    accept_config_change: bool = False,
) -> RebuiltLog:
    """Write the run key's Inspect log (status "error": eval_retry continues it) to `log_dir`.

    The resume runs under the newest record's configuration; records of another one stop it
    (ConfigChangedError) unless `accept_config_change`, as `resultlog run` does.
    """
    if not records:
        raise InspectPluginError(f"{run_key} has no records")
    foreign = [r for r in records if r.harness is None or r.harness.name != _HARNESS]
    if foreign:
        raise InspectPluginError(
            f"{run_key} has {len(foreign)} record(s) not written by Inspect AI "
            f"(sample {foreign[0].sample_id} epoch {foreign[0].epoch}); cannot rebuild its log"
        )
    newest = max(records, key=lambda r: (r.created_at, r.key))
    if not accept_config_change:
        _check_one_config(run_key, newest, records)
    spec_source = _stored(newest)
    spec, plan = spec_source.spec, spec_source.plan
    if task_file is not None:
        spec = spec.model_copy(update={"task_file": task_file})
    _check_task_file(spec.task_file)
    epochs = spec.config.epochs or 1
    ids = {str(sample_id) for sample_id in spec.dataset.sample_ids or ()}
    seeds = ResumeState.of(records, epochs).seeds
    samples = [_stored(r).sample for r in seeds if r.sample_id in ids]
    samples.sort(key=lambda s: (s.epoch, str(s.id)))
    return RebuiltLog(
        run_key=run_key,
        path=_write(spec, plan, samples, log_dir),
        reused=frozenset(_pair(sample) for sample in samples),
        expected=len(ids) * epochs,
        spec=spec,
        plan=plan,
        tasks=spec_source.tasks,
        config=newest.config,
    )


def rebuild_unstarted(
    run_key: RunKey, task: EvalTask, sibling: RebuiltLog, log_dir: str
) -> RebuiltLog:
    """An empty log of a task of the eval that made no durable record, so that eval_retry
    runs it too: the sibling's eval, configuration and plan, this task's identity."""
    spec = sibling.spec.model_copy(
        update={
            "task": task.name,
            "task_id": task.task_id,
            "task_file": task.task_file,
            "task_registry_name": task.registry_name,
            "task_args": task.args,
            "task_args_passed": task.args,
            "model": task.model,
            "dataset": EvalDataset(),
        }
    )
    _check_task_file(spec.task_file)
    return RebuiltLog(
        run_key=run_key,
        path=_write(spec, sibling.plan, [], log_dir),
        reused=frozenset(),
        expected=0,
        spec=spec,
        plan=sibling.plan,
        tasks=sibling.tasks,
    )


def _write(spec: EvalSpec, plan: EvalPlan, samples: list[EvalSample], log_dir: str) -> str:
    """Write a log of these samples for eval_retry to continue; return its path."""
    log = EvalLog(
        version=2,
        # Not "started": eval_retry would then look for a local crash buffer first.
        status="error",
        eval=spec,
        plan=plan,
        samples=samples,
        stats=EvalStats(started_at=spec.created),
        error=EvalError(
            message="resultlog: rebuilt from the results log", traceback="", traceback_ansi=""
        ),
    )
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    path = os.path.join(log_dir, f"resultlog-rebuilt_{spec.task}_{spec.task_id}.eval")
    write_eval_log(log, path)
    return path


def _check_one_config(run_key: RunKey, newest: SampleResult, records: list[SampleResult]) -> None:
    """Refuse to continue under the newest record's configuration over records of another."""
    others = Counter(
        r.config_fingerprint
        for r in records
        if r.config_fingerprint is not None and r.config_fingerprint != newest.config_fingerprint
    )
    if not others or newest.config is None:
        return
    common, count = others.most_common(1)[0]
    example = next(r for r in records if r.config_fingerprint == common)
    differing = differences(json.loads(newest.config), example.config)
    raise ConfigChangedError(
        f"{run_key}: {count} durable record(s) were made under another configuration than "
        f"its newest ({differing}); resuming would mix them: use a new run id, or "
        "`resultlog inspect resume --accept-config-change` to reuse them as they are"
    )


def _stored(record: SampleResult) -> StoredSample:
    """The record's payload; its sample must be the record's (sample, epoch)."""
    if record.harness_payload is None:
        raise InspectPluginError(
            f"sample {record.sample_id} epoch {record.epoch} of {record.run_key} "
            "has no Inspect payload"
        )
    stored = decode(record.harness_payload)
    if _pair(stored.sample) != (record.sample_id, record.epoch):
        raise InspectPluginError(
            f"the payload of sample {record.sample_id} epoch {record.epoch} holds "
            f"sample {stored.sample.id} epoch {stored.sample.epoch - 1}"
        )
    return stored


def _pair(sample: EvalSample) -> tuple[str, int]:
    return str(sample.id), sample.epoch - 1


def _check_task_file(task_file: str | None) -> None:
    if task_file is not None and not Path(task_file).is_file():
        raise InspectPluginError(
            f"the eval's task file {task_file!r} is not here (it is relative to the "
            "directory the eval ran in); pass --task-file PATH"
        )
