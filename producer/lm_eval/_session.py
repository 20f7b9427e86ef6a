"""`recording`: lm-eval's `simple_evaluate` and `evaluate`, their model made durable.

Inside the block, `lm_eval.simple_evaluate` (which lm-eval's CLI calls) notes the model and
its arguments, and `lm_eval.evaluator.evaluate` wraps the model it is given in a DurableLM
after checking each task's configuration and leasing it, and once lm-eval has scored every
document, writes each one's SampleResult to the results topic.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from resultlog.kafka import KafkaConnection
from resultlog.producer._config import ConfigChangedError, differences
from resultlog.producer._retry import WritePolicy
from resultlog.producer.lease import LeaseError, claim_lease
from resultlog.producer.lm_eval._answers import AnswerLog
from resultlog.producer.lm_eval._config import (
    ModelIdentity,
    model_identity,
    run_key,
    task_config,
)
from resultlog.producer.lm_eval._durable import DurableLM, TaskState
from resultlog.producer.lm_eval._errors import LmEvalError
from resultlog.producer.lm_eval._records import task_records
from resultlog.producer.store import KafkaResultStore
from resultlog.schemas import RunKey, SampleResult

__all__ = ["Recording", "recording", "simple_evaluate"]

log = logging.getLogger(__name__)

# evaluate()'s arguments that shape what the model is asked.
_OPTIONS = ("system_instruction", "apply_chat_template", "fewshot_as_multiturn")


@dataclass
class Recording:
    """One lm-eval run on the log: what it reused, asked and published, per run key."""

    kafka: KafkaConnection
    run_id: str
    budget_usd: float | None = None
    accept_config_change: bool = False
    model: Any = None
    model_args: Any = None
    tasks: dict[str, TaskState] = field(default_factory=dict)
    published: dict[RunKey, int] = field(default_factory=dict)

    def evaluate(self, original: Callable[..., Any], **kwargs: Any) -> Any:
        """lm-eval's evaluate() with a durable model; then every document's record."""
        lm = kwargs.pop("lm")
        identity = model_identity(self.model if self.model is not None else lm, self.model_args)
        options = {name: kwargs.get(name) for name in _OPTIONS}
        answers = AnswerLog(self.kafka)
        try:
            tasks = self._open_tasks(answers, identity, _tasks_of(kwargs["task_dict"]), options)
            single = int(getattr(lm, "world_size", 1)) == 1
            for state, size in tasks.values():
                if single:  # ranks split a task's documents: each asks only what is not durable
                    state.lease = _lease(self.kafka, state.run_key, size)
            self.tasks.update({name: state for name, (state, _) in tasks.items()})
            durable = DurableLM(lm, identity, self.tasks, answers, self.budget_usd)
            asked_samples = kwargs.get("log_samples", True)
            results = original(lm=durable, **{**kwargs, "log_samples": True})
        finally:
            for state in self.tasks.values():
                if state.lease is not None:
                    state.lease.release()
                    state.lease = None
            answers.close()
        if results is not None:
            self._publish(results)
            if not asked_samples:
                results.pop("samples", None)
        return results

    def _open_tasks(
        self,
        answers: AnswerLog,
        identity: ModelIdentity,
        tasks: Mapping[str, Any],
        options: dict[str, Any],
    ) -> dict[str, tuple[TaskState, int]]:
        """Each task's state; refuse one whose durable answers have another configuration."""
        opened: dict[str, tuple[TaskState, int]] = {}
        for name, task in tasks.items():
            key = run_key(self.run_id, name, identity)
            config = task_config(task, identity, options)
            found = answers.read(key)
            changed = found.config is not None and found.config != config.canonical
            if changed and not self.accept_config_change:
                differing = differences(json.loads(config.canonical), found.config)
                raise ConfigChangedError(
                    f"{key}: its durable answers were made under another configuration "
                    f"({differing}); use a new run id, or --accept-config-change to "
                    "reuse them as they are"
                )
            if found.config != config.canonical:
                answers.write_config(key, config.canonical)
            state = TaskState(key, config, found.answers, spent=found.spent)
            opened[name] = (state, max(1, len(task.eval_docs)))
        return opened

    def _publish(self, results: Mapping[str, Any]) -> None:
        samples = results.get("samples") or {}
        sizes = results.get("n-samples") or {}
        records: list[SampleResult] = []
        for name, logged in samples.items():
            state = self.tasks.get(name)
            if state is not None and logged:
                made = task_records(state, logged, sizes.get(name) or {})
                self.published[state.run_key] = len(made)
                records += made
        asyncio.run(_write(self.kafka, records))


async def _write(kafka: KafkaConnection, records: list[SampleResult]) -> None:
    """Write the records durably (acks=all, retried as `resultlog run` does)."""
    store = KafkaResultStore(kafka)
    policy = WritePolicy()
    try:
        for record in records:
            await policy.write(store, record)
    finally:
        await store.close()


def _tasks_of(task_dict: Mapping[Any, Any]) -> dict[str, Any]:
    """The tasks (by name) of evaluate()'s task dictionary, either of lm-eval's shapes."""
    if "tasks" in task_dict:
        return dict(task_dict["tasks"])
    from lm_eval.evaluator_utils import _handle_back_comp

    return dict(_handle_back_comp(dict(task_dict))[1])


def _lease(kafka: KafkaConnection, key: RunKey, size: int) -> Any:
    try:
        return claim_lease(kafka, key, (0, size))
    except LeaseError as exc:
        raise LmEvalError(f"not running task {key.benchmark_id}: {exc}") from exc


@contextmanager
def recording(
    kafka: KafkaConnection,
    run_id: str,
    *,
    budget_usd: float | None = None,
    accept_config_change: bool = False,
) -> Iterator[Recording]:
    """While the block runs, every lm-eval evaluation in this process is on the log."""
    import lm_eval
    from lm_eval import evaluator

    run = Recording(kafka, run_id, budget_usd, accept_config_change)
    original_simple, original_evaluate = evaluator.simple_evaluate, evaluator.evaluate

    def simple(*args: Any, **kwargs: Any) -> Any:
        run.model = kwargs.get("model", args[0] if args else None)
        run.model_args = kwargs.get("model_args")
        return original_simple(*args, **kwargs)

    def evaluate(**kwargs: Any) -> Any:
        return run.evaluate(original_evaluate, **kwargs)

    lm_eval.simple_evaluate = evaluator.simple_evaluate = simple
    evaluator.evaluate = evaluate
    try:
        yield run
    finally:
        lm_eval.simple_evaluate = evaluator.simple_evaluate = original_simple
        evaluator.evaluate = original_evaluate


def simple_evaluate(
    run_id: str,
    *,
    kafka: KafkaConnection | None = None,
    budget_usd: float | None = None,
    accept_config_change: bool = False,
    **kwargs: Any,
) -> Any:
    """lm-eval's `simple_evaluate(**kwargs)` on the log as run `run_id`: answers durable as
    they come, served from the log on a rerun, each document's record in the results topic.

    `kafka`: the connection (default: one from the RESULTLOG_* settings).
    """
    from resultlog.settings import Settings

    own = kafka is None
    connection = kafka if kafka is not None else KafkaConnection(Settings())
    try:
        with recording(
            connection, run_id, budget_usd=budget_usd, accept_config_change=accept_config_change
        ):
            import lm_eval

            return lm_eval.simple_evaluate(**kwargs)
    finally:
        if own:
            connection.close()
