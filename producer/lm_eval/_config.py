"""What identifies an lm-eval model and task: request keys, run keys and configurations.

A request's key is the sha256 of (model identity, request type, request arguments, the
how-many-th identical request it is): content, not rank or position, so any process count
finds the same answers. The model identity is the model type and its arguments without
secrets and without what only changes how requests travel (concurrency, retries, batching).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from resultlog.producer.lm_eval._errors import LmEvalError
from resultlog.schemas import InvalidRunKeyError, RunKey

__all__ = [
    "ModelIdentity",
    "TaskConfig",
    "args_digest",
    "canonical",
    "model_identity",
    "request_key",
    "task_config",
]

CONFIG_FORMAT = 1
_SECRET_NAME = re.compile(r"key|token|secret|password|credential|header", re.IGNORECASE)
_REDACTED = "<redacted>"
# Model arguments that change how requests travel, never what a model answers.
_TRANSPORT = frozenset(
    {
        "num_concurrent",
        "max_retries",
        "timeout",
        "batch_size",
        "max_batch_size",
        "verify_certificate",
        "ca_cert_path",
        "device",
    }
)


def canonical(value: Any) -> str:
    """Canonical JSON: sorted keys, no spaces, anything else as its str()."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_plain
    )


def _plain(value: Any) -> Any:
    prompt = getattr(value, "prompt", None)  # lm-eval's JsonChatStr
    return prompt if isinstance(prompt, str) else str(value)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ModelIdentity:
    """The model type, its `model=` name and its answer-shaping arguments."""

    model_type: str
    name: str
    args: Mapping[str, Any]

    @property
    def canonical(self) -> str:
        """The identity as canonical JSON (part of every request key)."""
        return canonical({"type": self.model_type, "args": dict(self.args)})


def model_identity(model: Any, model_args: str | Mapping[str, Any] | None) -> ModelIdentity:
    """The identity of `simple_evaluate`'s model (a registered name or an LM instance)."""
    args = _parsed(model_args)
    model_type = model if isinstance(model, str) else type(model).__name__
    kept = {
        name: _REDACTED if _SECRET_NAME.search(name) else value
        for name, value in args.items()
        if name not in _TRANSPORT
    }
    named = args.get("model") or args.get("pretrained") or getattr(model, "model", None)
    return ModelIdentity(model_type, str(named or model_type), kept)


def _parsed(model_args: str | Mapping[str, Any] | None) -> dict[str, Any]:
    if model_args is None:
        return {}
    if isinstance(model_args, Mapping):
        return dict(model_args)
    from lm_eval.utils import simple_parse_args_string

    return dict(simple_parse_args_string(model_args))


def run_key(run_id: str, task_name: str, identity: ModelIdentity) -> RunKey:
    """The run key of one task's records and answers."""
    try:
        return RunKey(run_id, task_name, identity.name)
    except InvalidRunKeyError as exc:
        raise LmEvalError(f"cannot name the run of task {task_name}: {exc}") from exc


def args_digest(request_type: str, args: Any) -> str:
    """What lm-eval's cache hook reports a request by: its type and arguments."""
    return _sha256(canonical([request_type, list(args)]))


def request_key(identity: ModelIdentity, request_type: str, args: Any, occurrence: int) -> str:
    """The key of one request: model identity, type, arguments, and which repeat it is."""
    return _sha256(canonical([identity.canonical, request_type, list(args), occurrence]))


class TaskConfig:
    """One task's configuration as canonical JSON and its sha256 fingerprint."""

    __slots__ = ("canonical", "fingerprint")

    def __init__(self, config: dict[str, Any]) -> None:
        self.canonical = canonical(config)
        self.fingerprint = _sha256(self.canonical)


def task_config(task: Any, identity: ModelIdentity, options: Mapping[str, Any]) -> TaskConfig:
    """The configuration of one task of the run: what shaped its answers and their scores.

    The task's own configuration without its metadata (lm-eval copies the model arguments,
    secrets and concurrency included, into every task's metadata).
    """
    dumped = dict(task.dump_config())
    metadata = dumped.pop("metadata", None) or {}
    version = metadata.get("version") if isinstance(metadata, Mapping) else None
    return TaskConfig(
        {
            "format": CONFIG_FORMAT,
            "harness": "lm_eval",
            "model": identity.model_type,
            "model_args": dict(identity.args),
            "benchmark": {
                "name": dumped.get("task"),
                "version": version,
                "num_fewshot": task.get_config("num_fewshot"),
                "config": dumped,
            },
            "options": dict(options),
        }
    )
