"""Harness payloads: an Inspect sample with its task's spec and plan, as bounded zstd JSON.

A payload is zstd-compressed JSON `{"spec": EvalSpec, "plan": EvalPlan, "sample": EvalSample}`
(as Inspect writes them in its logs), so any one record is enough to rebuild its
task's log. It stays within `MAX_HARNESS_PAYLOAD` by dropping what metrics never read, in
three forms: "full"; "no_events" (without the sample's events, events data, timelines and
attachments: the transcript of model calls and tool use); "minimal" (id, epoch, input,
choices, target, metadata, scores, model usage, timing, limit and uuid); "bare" (the minimal
form without its input, choices, target and metadata: a sample whose input alone passes the
bound still resumes from its scores; the record keeps what of the input fits).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import zstandard
from inspect_ai.log import EvalPlan, EvalSample, EvalSpec
from pydantic import BaseModel, ValidationError

from resultlog.producer.inspect._errors import InspectPluginError
from resultlog.producer.inspect._eval_tasks import EvalTask
from resultlog.schemas.models import MAX_HARNESS_PAYLOAD

__all__ = ["Payload", "PayloadForm", "StoredSample", "decode", "encode", "task_header"]

PayloadForm = Literal["full", "no_events", "minimal", "bare"]

_LEVEL = 9
_MAX_JSON_BYTES = 256 * 1024 * 1024  # what a payload may inflate to when read back
_NO_EVENTS: dict[str, Any] = {
    "events": [],
    "events_data": None,
    "timelines": None,
    "attachments": {},
}
_CUT = "[cut from the harness payload: too large]"
_MINIMAL_FIELDS = (
    "id",
    "epoch",
    "input",
    "choices",
    "target",
    "metadata",
    "scores",
    "model_usage",
    "role_usage",
    "started_at",
    "completed_at",
    "total_time",
    "working_time",
    "limit",
    "uuid",
)


class StoredSample(BaseModel):
    """What a payload holds: the sample and the spec and plan of its task."""

    spec: EvalSpec
    plan: EvalPlan
    tasks: list[EvalTask] = []  # every task of the eval (older payloads: none)
    sample: EvalSample


@dataclass(frozen=True)
class Payload:
    """A compressed payload, the form it took and the JSON size of the full form."""

    data: bytes
    form: PayloadForm
    full_json_bytes: int


def task_header(spec: EvalSpec, plan: EvalPlan, tasks: Sequence[EvalTask] = ()) -> bytes:
    """The JSON every payload of the task starts with (serialized once per task)."""
    listed = b"[" + b",".join(_json(task) for task in tasks) + b"]"
    return (
        b'{"spec":'
        + _json(spec)
        + b',"plan":'
        + _json(plan)
        + b',"tasks":'
        + listed
        + b',"sample":'
    )


def encode(header: bytes, sample: EvalSample, limit: int = MAX_HARNESS_PAYLOAD) -> Payload:
    """The smallest-loss form of the sample whose compressed payload fits `limit` bytes."""
    compressor = zstandard.ZstdCompressor(level=_LEVEL)  # not thread-safe: one per call
    full_json = len(header) + 1
    for form in ("full", "no_events", "minimal", "bare"):
        text = header + _json(_reduced(sample, form)) + b"}"
        if form == "full":
            full_json = len(text)
        data = compressor.compress(text)
        if len(data) <= limit:
            return Payload(data, form, full_json)
    raise InspectPluginError(  # epochs as records count them, from 0
        f"sample {sample.id} epoch {sample.epoch - 1} is too large for the results log "
        f"even in its bare form ({len(data)} compressed bytes, at most {limit})"
    )


def decode(data: bytes) -> StoredSample:
    """The spec, plan and sample of a payload; InspectPluginError if it is not one."""
    try:
        size = zstandard.frame_content_size(data)
        if size < 0 or size > _MAX_JSON_BYTES:
            raise InspectPluginError(f"harness payload of unusable size {size}")
        text = zstandard.ZstdDecompressor().decompress(data)
        return StoredSample.model_validate_json(text)
    except (zstandard.ZstdError, ValidationError) as exc:
        raise InspectPluginError(f"unreadable Inspect harness payload: {exc}") from exc


def _json(model: BaseModel) -> bytes:
    # As Inspect writes its logs: what JSON cannot hold (a model's custom_outputs callable
    # among its model_args, say) becomes null, and nulls are left out.
    return model.model_dump_json(exclude_none=True, fallback=lambda _value: None).encode()


def _reduced(sample: EvalSample, form: PayloadForm) -> EvalSample:
    if form == "full":
        return sample
    if form == "no_events":
        return sample.model_copy(update=_NO_EVENTS)
    kept = {name: getattr(sample, name) for name in _MINIMAL_FIELDS}
    if form == "bare":
        kept |= {"input": _CUT, "choices": None, "target": "", "metadata": {}}
    return EvalSample(**kept)
