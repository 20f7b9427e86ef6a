"""What every record of one Inspect task shares: its run key, shape and sample positions."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from inspect_ai.log import EvalPlan, EvalSpec

from resultlog.producer.inspect._config import InspectConfig, inspect_config
from resultlog.producer.inspect._errors import InspectPluginError
from resultlog.producer.inspect._eval_tasks import EvalTask, positions_of
from resultlog.producer.inspect._payload import task_header
from resultlog.schemas import InvalidRunKeyError, RunKey, SampleResult

__all__ = ["RUN_ID_ENV", "RUN_METADATA", "TaskRun", "run_id_of"]

log = logging.getLogger(__name__)

RUN_METADATA = "resultlog_run"
"""The eval metadata key naming the run: `inspect eval --metadata resultlog_run=NAME`."""

RUN_ID_ENV = "RESULTLOG_RUN_ID"
"""The environment variable naming the run when the eval's metadata does not."""


def run_id_of(spec: EvalSpec) -> str:
    """The run id: `--metadata resultlog_run=NAME`, else RESULTLOG_RUN_ID, else the eval id."""
    named = (spec.metadata or {}).get(RUN_METADATA)
    return str(named or os.environ.get(RUN_ID_ENV) or spec.eval_id)


@dataclass
class TaskRun:
    """One Inspect task of an eval (an `eval_id`) as resultlog sees it."""

    run_key: RunKey
    epochs: int
    dataset_size: int
    positions: Mapping[str, int]  # str(sample id) -> absolute sample index
    header: bytes  # the spec and plan every payload starts with
    config: InspectConfig  # what shaped the answers (rule 10), on every record
    deferred: list[SampleResult] = field(default_factory=list)  # degraded, written at task end
    refused: set[tuple[str, int]] = field(default_factory=set)  # durable pairs not asked again
    selected: Sequence[str] = ()  # str(sample id) of the samples this eval runs

    @property
    def selected_samples(self) -> int | None:
        """How many samples the eval selected, when fewer than the whole dataset."""
        count = len(self.selected)
        return count if 0 < count < self.dataset_size else None

    @property
    def span(self) -> tuple[int, int]:
        """The range of absolute indexes of the selected samples (what the task leases)."""
        indexes = [self.positions[s] for s in self.selected if s in self.positions]
        return (min(indexes), max(indexes) + 1) if indexes else (0, max(1, self.dataset_size))

    @classmethod
    def of(
        cls,
        spec: EvalSpec,
        plan: EvalPlan,
        *,
        whole: Sequence[int | str] | None = None,
        benchmark_id: str | None = None,
        siblings: Sequence[EvalTask] = (),
    ) -> TaskRun:
        """The task's identity from its spec; InspectPluginError if records cannot name it.

        `whole`: the ids of the task's whole dataset in order (positions count in it);
        `benchmark_id`: the run key's benchmark part when not the task's name;
        `siblings`: every task of the eval, remembered in each payload for resume.
        """
        ids = spec.dataset.sample_ids
        if ids is None:
            raise InspectPluginError(
                f"task {spec.task} records no sample ids; cannot key its records"
            )
        if whole is not None:
            positions = positions_of(whole)
            size = len(whole)
        else:
            positions, size = _selected_positions(spec, ids)
        reducer = spec.config.epochs_reducer
        if reducer not in (None, ["mean"]):
            log.warning(
                "resultlog: epochs reducer %s: resultlog's accuracy and scorer: metrics take "
                "the mean over epochs and may differ from Inspect's",
                reducer,
            )
        try:
            run_key = RunKey(run_id_of(spec), benchmark_id or spec.task, spec.model)
        except InvalidRunKeyError as exc:
            raise InspectPluginError(f"cannot name the run: {exc}") from exc
        return cls(
            run_key=run_key,
            epochs=spec.config.epochs or 1,
            dataset_size=size,
            positions=MappingProxyType(positions),
            header=task_header(spec, plan, siblings),
            selected=tuple(str(sample_id) for sample_id in ids),
            config=inspect_config(spec, plan, _base_url(spec.task_id, siblings)),
        )

    def index_of(self, sample_id: str) -> int:
        """The absolute index of a sample of this task."""
        try:
            return self.positions[sample_id]
        except KeyError:
            raise InspectPluginError(
                f"sample {sample_id!r} is not in task {self.run_key.benchmark_id}'s "
                "recorded sample ids"
            ) from None


def _base_url(task_id: str, tasks: Sequence[EvalTask]) -> str | None:
    """The endpoint the task's model resolved to, when the eval's tasks are known."""
    return next((task.base_url for task in tasks if task.task_id == task_id), None)


def _selected_positions(spec: EvalSpec, ids: Sequence[int | str]) -> tuple[dict[str, int], int]:
    """Positions from the spec alone (the whole dataset unknown): right for the whole dataset
    or a `--limit` of an unshuffled one; any other selection cannot be placed, so refused."""
    config = spec.config
    if config.sample_id is not None or (spec.dataset.shuffled and config.limit is not None):
        raise InspectPluginError(
            f"task {spec.task}: cannot tell where the selected samples sit in the whole "
            "dataset, so their records could overwrite other samples' (a selection by "
            "--sample-id or of a shuffled dataset needs a supported Inspect version)"
        )
    limit = config.limit
    # `--limit A-B` is stored as [A-1, B]: positions count from the range's start.
    offset = limit[0] if isinstance(limit, tuple | list) else 0
    if spec.dataset.shuffled and limit is None:  # as _eval_tasks orders a shuffled dataset
        ids = sorted(ids, key=lambda i: (0, i, "") if isinstance(i, int) else (1, 0, str(i)))
    positions = {str(sample_id): offset + i for i, sample_id in enumerate(ids)}
    size = spec.dataset.samples if spec.dataset.samples is not None else offset + len(ids)
    return positions, max(size, offset + len(ids))
