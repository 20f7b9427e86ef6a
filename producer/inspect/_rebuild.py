"""Rebuild an Inspect eval log from one run key's records (public inspect_ai.log APIs only)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from inspect_ai.log import EvalError, EvalLog, EvalSample, EvalStats, write_eval_log

from resultlog.consumers import ResumeState
from resultlog.producer.inspect._errors import InspectPluginError
from resultlog.producer.inspect._payload import StoredSample, decode
from resultlog.schemas import RunKey, SampleResult

__all__ = ["RebuiltLog", "rebuild_log"]

_HARNESS = "inspect_ai"


@dataclass(frozen=True)
class RebuiltLog:
    """An Inspect log written from the results log: where, and which pairs it holds."""

    run_key: RunKey
    path: str
    reused: frozenset[tuple[str, int]]  # (sample id, 0-based epoch) of every stored sample
    expected: int  # the task's (sample, epoch) pairs


def rebuild_log(
    run_key: RunKey, records: list[SampleResult], log_dir: str, task_file: str | None = None
) -> RebuiltLog:
    """Write the run key's Inspect log (status "error": eval_retry continues it) to `log_dir`."""
    if not records:
        raise InspectPluginError(f"{run_key} has no records")
    foreign = [r for r in records if r.harness is None or r.harness.name != _HARNESS]
    if foreign:
        raise InspectPluginError(
            f"{run_key} has {len(foreign)} record(s) not written by Inspect AI "
            f"(sample {foreign[0].sample_id} epoch {foreign[0].epoch}); cannot rebuild its log"
        )
    newest = max(records, key=lambda r: (r.created_at, r.key))
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
    return RebuiltLog(
        run_key=run_key,
        path=path,
        reused=frozenset(_pair(sample) for sample in samples),
        expected=len(ids) * epochs,
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
