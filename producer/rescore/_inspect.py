"""Inspect AI scorers over stored records: a TaskState from each record, Inspect's code decides."""

from __future__ import annotations

import inspect as pyinspect
from dataclasses import dataclass
from typing import Any

from inspect_ai.log import EvalSample
from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    ModelName,
    ModelOutput,
)
from inspect_ai.scorer import Scorer, Target
from inspect_ai.solver import TaskState

from resultlog.producer.inspect._mapping import score_fields, truncated_of
from resultlog.producer.inspect._payload import StoredSample, decode, encode, task_header
from resultlog.producer.rescore._answer import stored_answer, targets
from resultlog.producer.rescore._errors import RescoreError
from resultlog.producer.rescore._grader import Grader
from resultlog.schemas import SampleResult

__all__ = ["inspect_scorer", "task_state"]

_INSPECT = "inspect_ai"


@dataclass(frozen=True)
class _InspectScorer:
    """An Inspect AI scorer, run on a TaskState rebuilt from each stored record."""

    name: str
    scorer: Scorer
    score_name: str  # the key Inspect gives its scores (`includes`, `match`)
    graded: bool = False

    async def score(self, record: SampleResult, grader: Grader | None) -> dict[str, Any]:
        """Inspect's score of the stored sample, mapped as the plugin maps an eval's."""
        stored = _stored(record)
        state = _state(stored.sample, stored.spec.model) if stored else task_state(record)
        try:
            result = await self.scorer(state, state.target)
        except Exception as exc:  # the scorer is user code: say where it failed
            raise RescoreError(
                f"scorer {self.name} failed on sample {record.sample_id} epoch {record.epoch}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        scores = {self.score_name: result} if result is not None else {}
        changed: dict[str, Any] = {"score": score_fields(scores)}
        if stored is not None:  # the payload's sample carries the new scores, as Inspect's would
            sample = stored.sample.model_copy(update={"scores": scores})
            payload = encode(task_header(stored.spec, stored.plan, stored.tasks), sample)
            changed |= {"harness_payload": payload.data, "truncated": truncated_of(payload)}
        return changed


def inspect_scorer(spec: str, found: Any) -> _InspectScorer:
    """The Inspect scorer an import path names: a scorer, or a factory called without arguments."""
    scorer = found if _is_scorer(found) else _made(spec, found)
    return _InspectScorer(spec, scorer, _registry_name(scorer, spec))


def _is_scorer(found: Any) -> bool:
    """Whether `found` is a scorer itself (async, taking state and target)."""
    if not pyinspect.iscoroutinefunction(found) and not pyinspect.iscoroutinefunction(
        getattr(found, "__call__", None)  # noqa: B004 - a callable object's method
    ):
        return False
    return len(pyinspect.signature(found).parameters) == 2


def _made(spec: str, factory: Any) -> Scorer:
    if not callable(factory):
        raise RescoreError(f"--scorer {spec}: not an Inspect AI scorer")
    try:
        made = factory()
    except TypeError as exc:
        raise RescoreError(
            f"--scorer {spec}: cannot make the scorer without arguments: {exc}"
        ) from exc
    if not callable(made):
        raise RescoreError(f"--scorer {spec}: its factory did not return a scorer")
    return made  # type: ignore[no-any-return]


def _registry_name(scorer: Scorer, spec: str) -> str:
    """The name Inspect scores the scorer under (its registry name, unqualified)."""
    from inspect_ai._util.registry import is_registry_object, registry_unqualified_name

    if is_registry_object(scorer):
        return registry_unqualified_name(scorer)
    return spec.rpartition(":")[2]


def _stored(record: SampleResult) -> StoredSample | None:
    """The Inspect sample of a record the plugin wrote (None for any other record)."""
    if record.harness is None or record.harness.name != _INSPECT or not record.harness_payload:
        return None
    return decode(record.harness_payload)


def task_state(record: SampleResult) -> TaskState:
    """The finished TaskState of a record: Inspect's own sample for a record the plugin wrote
    (as `inspect_ai.score` builds it from an eval log), else one built from its fields."""
    stored = _stored(record)
    if stored is not None:
        return _state(stored.sample, stored.spec.model)
    answer = stored_answer(record) or ""
    messages: list[ChatMessage] = [
        ChatMessageSystem(content=m.content or "")
        if m.role == "system"
        else ChatMessageUser(content=m.content if m.content is not None else record.input)
        for m in record.messages
        if m.role in ("system", "user")
    ]
    model = record.model if "/" in record.model else f"resultlog/{record.model}"
    messages.append(ChatMessageAssistant(content=answer, model=record.model))
    found = targets(record)
    return TaskState(
        model=ModelName(model),
        sample_id=record.sample_id,
        epoch=record.epoch + 1,
        input=record.input,
        target=Target(found if len(found) != 1 else found[0]),
        messages=messages,
        output=ModelOutput.from_content(record.model, answer),
        completed=True,
    )


def _state(sample: EvalSample, model: str) -> TaskState:
    return TaskState(
        model=ModelName(model),
        sample_id=sample.id,
        epoch=sample.epoch,
        input=sample.input,
        target=Target(sample.target),
        choices=sample.choices,
        messages=sample.messages,
        output=sample.output,
        completed=True,
        metadata=sample.metadata,
        store=sample.store,
    )
