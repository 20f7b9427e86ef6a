"""The tasks of one Inspect eval as resultlog keys them: names made unique, whole datasets.

Inspect's hooks see one task's spec at a time, and its spec lists only the samples selected
(`--limit`, `--sample-id`), not where they sit in the task's dataset. At run start Inspect
holds every resolved task (`emit_run_start(..., tasks)`): we read them from that frame, so
each task's records are keyed by the position of the sample in its whole dataset, and two
tasks of one name (other arguments or files) get distinct, stable run keys.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from resultlog.producer.inspect._errors import InspectPluginError

__all__ = [
    "EvalTask",
    "eval_tasks",
    "key_names",
    "logged_tasks",
    "positions_of",
    "resolved_base_url",
    "run_tasks",
]

_FRAME = "emit_run_start"  # the Inspect function whose `tasks` local lists the run's tasks
_MAX_FRAMES = 12


class EvalTask(BaseModel):
    """One task of an eval as the records remember it (so a resume can run it again)."""

    task_id: str
    name: str
    benchmark_id: str  # the run key's benchmark part: the name, made unique when it must be
    model: str
    task_file: str | None = None
    registry_name: str | None = None
    args: dict[str, Any] = {}
    base_url: str | None = None  # the endpoint the model resolved (its provider's env var too)


@dataclass(frozen=True)
class _Resolved:
    """What we need of an Inspect ResolvedTask."""

    task_id: str
    name: str
    model: str
    task_file: str | None
    registry_name: str | None
    args: dict[str, Any]
    base_url: str | None
    sample_ids: list[int | str | None]
    shuffled: bool


def eval_tasks(
    run: list[Any] | None,
) -> tuple[list[EvalTask], dict[str, list[int | str] | None]] | None:
    """The run's tasks and each one's whole-dataset ids (by task id), from its ResolvedTasks
    (`run_tasks`); None without them: then records fall back to what each task's spec says."""
    if run is None:
        return None
    resolved = [_resolved(task) for task in run]
    tasks = _named(resolved)
    datasets = {
        r.task_id: None if None in r.sample_ids else _ordered(r.sample_ids, r.shuffled)
        for r in resolved
    }
    return tasks, datasets


def logged_tasks(specs: Sequence[Any], base_urls: dict[str, str | None]) -> list[EvalTask]:
    """The tasks of logged evals (their EvalSpecs), named as the plugin names them: the
    tasks of one eval (one Inspect run id) together, as they ran."""
    by_eval: dict[str, dict[str, _Resolved]] = {}
    for spec in specs:
        by_eval.setdefault(spec.run_id, {})[spec.task_id] = _Resolved(
            task_id=spec.task_id,
            name=spec.task,
            model=spec.model,
            task_file=spec.task_file,
            registry_name=spec.task_registry_name,
            args=dict(spec.task_args or {}),
            base_url=base_urls.get(spec.task_id),
            sample_ids=[],
            shuffled=bool(spec.dataset.shuffled),
        )
    return [task for resolved in by_eval.values() for task in _named(list(resolved.values()))]


def _named(resolved: Sequence[_Resolved]) -> list[EvalTask]:
    """The tasks of one eval, each with its benchmark id."""
    names = key_names(resolved)
    return [
        EvalTask(
            task_id=r.task_id,
            name=r.name,
            benchmark_id=names[r.task_id],
            model=r.model,
            task_file=r.task_file,
            registry_name=r.registry_name,
            args=r.args,
            base_url=r.base_url,
        )
        for r in resolved
    ]


def key_names(tasks: Sequence[_Resolved]) -> dict[str, str]:
    """Each task's benchmark id: its name, or name-<hash of file and arguments> when another
    task of the eval has the same name and model; identical twins are refused."""
    groups: dict[tuple[str, str], list[_Resolved]] = {}
    for task in tasks:
        groups.setdefault((task.name, task.model), []).append(task)
    names: dict[str, str] = {}
    for (name, model), same in groups.items():
        if len(same) == 1:
            names[same[0].task_id] = name
            continue
        seen: dict[str, _Resolved] = {}
        for task in same:
            digest = _identity_hash(task)
            if digest in seen:
                raise InspectPluginError(
                    f"the eval runs task {name} on {model} twice with the same file "
                    f"({task.task_file}) and arguments ({json.dumps(task.args, default=str)}): "
                    "their records would overwrite each other; run it once with --epochs instead"
                )
            seen[digest] = task
            names[task.task_id] = f"{name}-{digest}"
    return names


def positions_of(sample_ids: Sequence[int | str]) -> dict[str, int]:
    """Each sample's absolute index from its whole dataset's ordered ids."""
    positions: dict[str, int] = {}
    for index, sample_id in enumerate(sample_ids):
        key = str(sample_id)
        if key in positions:
            raise InspectPluginError(
                f"sample id {key!r} appears twice in the dataset: cannot key its records"
            )
        positions[key] = index
    return positions


def _identity_hash(task: _Resolved) -> str:
    """A short stable hash of what tells apart two tasks of one name: file, registry name, args."""
    identity = json.dumps(
        [task.task_file, task.registry_name, task.args], sort_keys=True, default=str
    )
    return hashlib.sha256(identity.encode()).hexdigest()[:8]


def _ordered(sample_ids: list[Any], shuffled: bool) -> list[int | str]:
    """The dataset's ids in the order positions count: as loaded, or sorted when shuffled (a
    shuffled order differs from run to run; the configuration records `shuffled`)."""
    if not shuffled:
        return sample_ids
    return sorted(sample_ids, key=lambda i: (0, i, "") if isinstance(i, int) else (1, 0, str(i)))


def run_tasks() -> list[Any] | None:
    """Inspect's ResolvedTasks of the run starting, read from its frames: called from
    `on_run_start`; None when the frame is not found (another Inspect version)."""
    frame = inspect.currentframe()
    try:
        for _ in range(_MAX_FRAMES):
            if frame is None:
                return None
            if frame.f_code.co_name == _FRAME and "tasks" in frame.f_locals:
                return list(frame.f_locals["tasks"])
            frame = frame.f_back
        return None
    finally:
        del frame


def _resolved(task: Any) -> _Resolved:
    """One Inspect ResolvedTask's identity and whole dataset."""
    dataset = task.task.dataset
    return _Resolved(
        task_id=str(task.id),
        name=str(task.task.name),
        model=str(task.model),
        task_file=task.task_file,
        registry_name=getattr(task.task, "registry_name", None),
        args=dict(task.task_args or {}),
        base_url=_base_url(task.model),
        sample_ids=[sample.id for sample in dataset],
        shuffled=bool(dataset.shuffled),
    )


def resolved_base_url(model: str, base_url: str | None, args: dict[str, Any]) -> str | None:
    """The base URL Inspect would resolve for a logged task's model here (its provider's
    environment), as the plugin records it; None when the model cannot be made here."""
    from inspect_ai.model import get_model

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # Inspect's banner of its hooks
            return _base_url(get_model(model, base_url=base_url, **args))
    except Exception:  # a provider whose package, key or endpoint is missing here
        return base_url


def _base_url(model: Any) -> str | None:
    """The base URL a model's provider resolved (explicit, or from its environment)."""
    url = getattr(getattr(model, "api", None), "base_url", None)
    return str(url) if url else None
