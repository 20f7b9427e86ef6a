"""An Inspect task's configuration (what shaped its answers) as the records' canonical JSON.

Design rule 10 for Inspect: the same fields as `resultlog run`'s configuration where Inspect
has them (model, endpoint, generation parameters, the task and its version, the dataset, the
solver plan, the scorers). Nothing that changes between an eval and its resume goes in: not
the eval id, the task file's path, the dataset's path (Inspect keeps it relative to the
working directory), the limit or the log directory. Model arguments whose name
looks like a secret keep their name, never their value.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from inspect_ai.log import EvalPlan, EvalSpec

__all__ = ["InspectConfig", "inspect_config"]

CONFIG_FORMAT = 1
_SECRET_NAME = re.compile(r"key|token|secret|password|credential", re.IGNORECASE)
_REDACTED = "<redacted>"


class InspectConfig:
    """The canonical JSON of a task's configuration and its sha256 fingerprint."""

    __slots__ = ("canonical", "fingerprint")

    def __init__(self, config: dict[str, Any]) -> None:
        self.canonical = json.dumps(
            config, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
        )
        self.fingerprint = hashlib.sha256(self.canonical.encode("utf-8")).hexdigest()


def inspect_config(spec: EvalSpec, plan: EvalPlan, base_url: str | None = None) -> InspectConfig:
    """The configuration of one task of an eval, from its spec and plan.

    `base_url`: the endpoint the model resolved to, when the spec has none (Inspect records
    only an explicit `--model-base-url`, not its provider's `<PROVIDER>_BASE_URL`).
    """
    dataset = spec.dataset
    return InspectConfig(
        {
            "format": CONFIG_FORMAT,
            "harness": "inspect_ai",
            "model": spec.model,
            "base_url": spec.model_base_url or base_url,
            "model_args": _redacted(spec.model_args),
            "model_roles": {
                role: _dumped(config) for role, config in (spec.model_roles or {}).items()
            },
            "generation": spec.model_generate_config.model_dump(mode="json", exclude_none=True),
            "benchmark": {
                "name": spec.task,
                "version": spec.task_version,
                "args": spec.task_args,
            },
            "dataset": {
                "name": dataset.name,
                "samples": dataset.samples,
                "shuffled": dataset.shuffled,
            },
            "plan": {
                "steps": [step.model_dump(mode="json") for step in plan.steps],
                "finish": None if plan.finish is None else plan.finish.model_dump(mode="json"),
                "config": plan.config.model_dump(mode="json", exclude_none=True),
            },
            "scorers": [scorer.model_dump(mode="json") for scorer in spec.scorers or []],
        }
    )


def _dumped(config: Any) -> Any:
    """A model role's configuration (one or a list) as JSON values, secrets redacted."""
    if isinstance(config, list):
        return [_dumped(item) for item in config]
    dumped = config.model_dump(mode="json", exclude_none=True)
    if isinstance(dumped.get("args"), dict):
        dumped["args"] = _redacted(dumped["args"])
    return dumped


def _redacted(model_args: dict[str, Any]) -> dict[str, Any]:
    """The model arguments, each secret-looking one's value replaced."""
    return {
        name: _REDACTED if _SECRET_NAME.search(name) else value
        for name, value in model_args.items()
    }
