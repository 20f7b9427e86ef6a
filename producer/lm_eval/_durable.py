"""An lm-eval model wrapped so that every answered request is durable as it completes.

It has CachingLM's shape: requests whose answer the answers topic holds are served from
it, the rest go to the model, whose cache hook (`add_partial`, called as each response
completes) writes each answer with acks=all before lm-eval moves on.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple

from resultlog.producer._responses import parse_usage
from resultlog.producer.lease import RunLease
from resultlog.producer.lm_eval._answers import Answer, AnswerLog, Tokens
from resultlog.producer.lm_eval._config import (
    ModelIdentity,
    TaskConfig,
    args_digest,
    canonical,
    request_key,
)
from resultlog.producer.lm_eval._errors import LmEvalBudgetError
from resultlog.schemas import RunKey

__all__ = ["REQUEST_TYPES", "DurableLM", "TaskState"]

log = logging.getLogger(__name__)

REQUEST_TYPES = ("loglikelihood", "loglikelihood_rolling", "generate_until")


@dataclass
class TaskState:
    """One task of the run: its run key, configuration, durable answers, spend and lease."""

    run_key: RunKey
    config: TaskConfig
    answers: dict[str, Answer]
    spent: float = 0.0
    lease: RunLease | None = None
    reused: int = 0
    asked: int = 0
    found: int = field(init=False)

    def __post_init__(self) -> None:
        self.found = len(self.answers)


class _Pending(NamedTuple):
    key: str
    task: TaskState | None
    doc_id: int | None
    repeat: int


@dataclass(eq=False, repr=False)  # a repr would print every task's answers
class DurableLM:
    """Serves durable answers, asks the model the rest, and writes each answer as it comes."""

    lm: Any
    identity: ModelIdentity
    tasks: dict[str, TaskState]
    answers: AnswerLog
    budget_usd: float | None = None
    _pending: defaultdict[str, deque[_Pending]] = field(
        default_factory=lambda: defaultdict(deque), init=False
    )
    _written: set[str] = field(default_factory=set, init=False)
    _stamps: defaultdict[str, deque[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(deque), init=False
    )
    # What the responses parsed since the last answer reported.
    _cost: float = field(default=0.0, init=False)
    _tokens: Tokens | None = field(default=None, init=False)
    _over: str | None = field(default=None, init=False)  # why no further request may start

    def __post_init__(self) -> None:
        self._api = hasattr(self.lm, "_create_payload")
        self.lm.set_cache_hook(_Hook(self))
        if self._api:
            self._wrap_api(self.lm)

    def __getattr__(self, attr: str) -> Any:
        if attr in REQUEST_TYPES:
            return partial(self._answer, attr)
        return getattr(self.lm, attr)

    def _answer(self, request_type: str, requests: list[Any]) -> list[Any]:
        """Responses to `requests` in order: durable ones served, the others asked."""
        served: list[Any] = [None] * len(requests)
        remaining: list[tuple[int, Any, _Pending, str]] = []
        seen: Counter[str] = Counter()
        for i, request in enumerate(requests):
            digest = args_digest(request_type, request.args)
            occurrence = seen[digest]
            seen[digest] += 1
            key = request_key(self.identity, request_type, request.args, occurrence)
            task = self.tasks.get(request.task_name)
            found = task.answers.get(key) if task is not None else None
            if found is not None and task is not None:
                served[i] = found.response
                task.reused += 1
                continue
            pending = _Pending(key, task, request.doc_id, occurrence)
            remaining.append((i, request, pending, digest))
        if not remaining:
            return served
        self._check_budget([pending.task for _, _, pending, _ in remaining])
        for _, request, pending, digest in remaining:
            self._pending[digest].append(pending)
            stamp_key = _stamp_key(request.args[0])
            if stamp_key is not None:
                x_bench = {"sample_id": str(request.doc_id), "sample_epoch": pending.repeat}
                self._stamps[stamp_key].append(x_bench)
        try:
            responses = getattr(self.lm, request_type)([request for _, request, _, _ in remaining])
        finally:
            self._pending.clear()
            self._stamps.clear()
        for (i, _, pending, _), response in zip(remaining, responses, strict=True):
            served[i] = response
            if pending.key not in self._written:  # a model that never reports through the hook
                self.record(request_type, pending, response)
        return served

    def record(self, request_type: str, pending: _Pending, response: Any) -> None:
        """Make one answer durable (acks=all); stop once its task's budget is spent."""
        task = pending.task
        cost, self._cost = self._cost, 0.0
        tokens, self._tokens = self._tokens, None
        if task is None:
            return
        if task.lease is not None:
            task.lease.check()  # a process that stalled past its lease writes nothing more
        answer = Answer(request_type, response, cost, pending.doc_id, pending.repeat, tokens)
        self.answers.write(task.run_key, pending.key, answer)
        self._written.add(pending.key)
        task.answers[pending.key] = answer
        task.asked += 1
        task.spent += cost
        if self.budget_usd is not None and task.spent >= self.budget_usd:
            self._over = (
                f"{task.run_key} has spent {task.spent:.6f} of its {self.budget_usd:.6f} USD budget"
            )
            if not self._api:  # an API model is stopped before its next request instead
                raise LmEvalBudgetError(self._over)

    def reported(self, request_type: str, args: Any, response: Any) -> None:
        """The model's cache hook: one request of ours has its response."""
        queue = self._pending.get(args_digest(request_type, args))
        if queue:
            self.record(request_type, queue.popleft(), response)

    def _check_budget(self, tasks: list[TaskState | None]) -> None:
        if self._over is not None:
            raise LmEvalBudgetError(self._over)
        if self.budget_usd is None:
            return
        for task in tasks:
            if task is not None and task.spent >= self.budget_usd:
                raise LmEvalBudgetError(
                    f"{task.run_key} has spent {task.spent:.6f} of its "
                    f"{self.budget_usd:.6f} USD budget; nothing more is asked"
                )

    def _wrap_api(self, lm: Any) -> None:
        """Stamp x_bench on lm-eval's OpenAI-compatible requests; learn what each used."""
        create = lm._create_payload
        stamps = _stamps_payload(lm)

        def create_payload(messages: Any, *args: Any, **kwargs: Any) -> Any:
            if self._over is not None:  # raised here, before the request: never retried
                raise LmEvalBudgetError(self._over)
            payload = create(messages, *args, **kwargs)
            queue = self._stamps.get(_stamp_key(messages) or "")
            if stamps and queue:
                payload["x_bench"] = queue.popleft()
            return payload

        lm._create_payload = create_payload
        for name in ("parse_generations", "parse_logprobs"):
            setattr(lm, name, self._billing(getattr(lm, name)))

    def _billing(self, parse: Callable[..., Any]) -> Callable[..., Any]:
        # lm-eval parses a response and reports its answers with no await between: what is
        # parsed here belongs to the next answer reported (a batch's bill to its first).
        def parsed(*args: Any, outputs: Any = None, **kwargs: Any) -> Any:
            cost, tokens = _usage_of(outputs)
            self._cost += cost
            if tokens is not None:
                self._tokens = tokens.plus(self._tokens)
            return parse(*args, outputs=outputs, **kwargs)

        return parsed


class _Hook:
    """lm-eval's CacheHook interface, reporting to the DurableLM."""

    def __init__(self, durable: DurableLM) -> None:
        self._durable = durable

    def add_partial(self, attr: str, req: Any, res: Any) -> None:
        """A request's response, as the model reports it the moment it completes."""
        self._durable.reported(attr, req, res)


def _stamps_payload(lm: Any) -> bool:
    """x_bench only to lm-eval's local OpenAI-compatible models (hosted APIs may refuse it)."""
    from lm_eval.models.openai_completions import LocalChatCompletion, LocalCompletionsAPI

    return type(lm) in (LocalChatCompletion, LocalCompletionsAPI)


def _stamp_key(context: Any) -> str | None:
    """What names a request's prompt in both its arguments and its payload's messages."""
    prompt = getattr(context, "prompt", None)  # a JsonChatStr: the chat as JSON text
    if isinstance(prompt, str):
        try:
            return canonical(json.loads(prompt))
        except ValueError:
            return None
    if isinstance(context, list) and context and isinstance(context[0], dict):
        return canonical(context)
    return context if isinstance(context, str) else None


def _usage_of(outputs: Any) -> tuple[float, Tokens | None]:
    """The USD cost and tokens the endpoint reported for a response (or a batch of them),
    read as `resultlog run` reads them; a usage it cannot trust is logged and not counted."""
    items = outputs if isinstance(outputs, list) else [outputs]
    cost, tokens = 0.0, None
    for item in items:
        try:
            usage = parse_usage(item.get("usage") if isinstance(item, dict) else None)
        except ValueError as exc:
            log.warning("lm-eval response with an unusable usage: %s", exc)
            continue
        if usage is None:
            continue
        cost += usage.cost or 0.0
        used = Tokens(
            usage.input_tokens, usage.output_tokens, usage.total_tokens, usage.reasoning_tokens
        )
        tokens = used.plus(tokens)
    return cost, tokens
