"""What every record of one Inspect task shares: its run key, shape and sample positions."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from inspect_ai.log import EvalPlan, EvalSpec

from resultlog.producer.inspect._config import InspectConfig, inspect_config
from resultlog.producer.inspect._errors import InspectPluginError
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

    @classmethod
    def of(cls, spec: EvalSpec, plan: EvalPlan) -> TaskRun:
        """The task's identity from its spec; InspectPluginError if records cannot name it."""
        ids = spec.dataset.sample_ids
        if ids is None:
            raise InspectPluginError(
                f"task {spec.task} records no sample ids; cannot key its records"
            )
        limit = spec.config.limit
        # `--limit A-B` is stored as [A-1, B]: positions count from the range's start.
        offset = limit[0] if isinstance(limit, tuple | list) else 0
        positions = {str(sample_id): offset + i for i, sample_id in enumerate(ids)}
        reducer = spec.config.epochs_reducer
        if reducer not in (None, ["mean"]):
            log.warning(
                "resultlog: epochs reducer %s: resultlog's accuracy is the mean over epochs "
                "and may differ from Inspect's",
                reducer,
            )
        try:
            run_key = RunKey(run_id_of(spec), spec.task, spec.model)
        except InvalidRunKeyError as exc:
            raise InspectPluginError(f"cannot name the run: {exc}") from exc
        return cls(
            run_key=run_key,
            epochs=spec.config.epochs or 1,
            dataset_size=offset + len(ids),
            positions=MappingProxyType(positions),
            header=task_header(spec, plan),
            config=inspect_config(spec, plan),
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
