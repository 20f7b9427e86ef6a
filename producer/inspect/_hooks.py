"""The hooks Inspect calls during an eval: publish every finished (sample, epoch) to resultlog.

Inspect swallows a hook's exceptions except `LimitExceededError`: every failure here is
raised as one, so a failed publish ends the task in error naming resultlog, and `on_run_end`
raises again so that `inspect eval` exits non-zero.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NoReturn

import anyio.to_thread
from inspect_ai.hooks import (
    BeforeModelGenerate,
    Hooks,
    RunEnd,
    RunStart,
    SampleEnd,
    SampleInit,
    TaskEnd,
    TaskStart,
)
from inspect_ai.log import EvalSample
from inspect_ai.util import LimitExceededError
from pydantic import ValidationError

from resultlog.producer._config import differences
from resultlog.producer.inspect import _xbench
from resultlog.producer.inspect._errors import InspectPluginError
from resultlog.producer.inspect._eval_tasks import EvalTask, eval_tasks, run_tasks
from resultlog.producer.inspect._mapping import to_record
from resultlog.producer.inspect._publisher import Publisher
from resultlog.producer.inspect._retried import Retried, retried_tasks
from resultlog.producer.inspect._task import TaskRun
from resultlog.producer.lease import LeaseError, RunLease
from resultlog.schemas import Harness, RunKey, WriterProcess
from resultlog.settings import Settings, local_stack

__all__ = ["ENABLE_ENV", "HOOKS_NAME", "PublishingHooks", "refusing"]

log = logging.getLogger(__name__)

HOOKS_NAME = "publish"
"""Registered as `resultlog/publish` (for INSPECT_REQUIRED_HOOKS)."""

ENABLE_ENV = "RESULTLOG_BOOTSTRAP_SERVERS"
"""The hooks publish only when this environment variable is set."""

_PREFIX = "resultlog: "  # every failure Inspect shows names us

# Pairs already durable per run key, set by `resultlog inspect resume` for the eval it
# continues: Inspect must reuse them from the rebuilt log, never ask the model again.
_DURABLE: dict[RunKey, frozenset[tuple[str, int]]] = {}
# The run key of each task (by Inspect's task id) of the eval a resume continues: the keys
# its records were written under, whatever the tasks the retry holds.
_KEYS: dict[str, RunKey] = {}
# The configuration (canonical JSON) the durable records of each run key were made under:
# a resume whose tasks resolve another one (another endpoint, say) is refused.
_CONFIGS: dict[RunKey, str] = {}


@contextmanager
def refusing(
    durable: Mapping[RunKey, frozenset[tuple[str, int]]],
    keys: Mapping[str, RunKey] | None = None,
    configs: Mapping[RunKey, str] | None = None,
) -> Iterator[None]:
    """While the block runs, a sample whose (id, epoch) is durable fails before any model call,
    the tasks of `keys` (by task id) write under those run keys, and a task whose
    configuration differs from its run key's in `configs` fails before any model call."""
    _DURABLE.update(durable)
    _KEYS.update(keys or {})
    _CONFIGS.update(configs or {})
    try:
        yield
    finally:
        for run_key in durable:
            _DURABLE.pop(run_key, None)
        for task_id in keys or {}:
            _KEYS.pop(task_id, None)
        for run_key in configs or {}:
            _CONFIGS.pop(run_key, None)


@dataclass
class _Run:
    """One Inspect run (one `eval()` call): its publisher, tasks and publish failures."""

    publisher: Publisher
    harness: Harness
    worker: WriterProcess
    tasks: dict[str, TaskRun] = field(default_factory=dict)  # by Inspect's eval_id
    eval_tasks: list[EvalTask] = field(default_factory=list)  # every task of the eval
    datasets: dict[str, list[int | str] | None] = field(default_factory=dict)  # by task id
    leases: dict[str, RunLease] = field(default_factory=dict)  # by Inspect's eval_id
    failures: list[str] = field(default_factory=list)
    failed_run_ids: set[str] = field(default_factory=set)  # resultlog run ids missing results
    retried: dict[str, Retried] = field(default_factory=dict)  # by task id: Inspect's retries


class PublishingHooks(Hooks):
    """Publishes each finished (sample, epoch) of an eval as a SampleResult; one per process."""

    def __init__(self) -> None:
        self._enabled: dict[str, bool] = {}
        self._runs: dict[str, _Run] = {}

    def enabled(self) -> bool:
        """On when RESULTLOG_BOOTSTRAP_SERVERS is set or a local stack runs (`resultlog up`);
        if misconfigured, raise (Inspect stops)."""
        servers = os.environ.get(ENABLE_ENV) or local_stack() or ""
        if servers not in self._enabled:
            if servers:
                _xbench.check()
                _settings()
            self._enabled[servers] = bool(servers)
        return self._enabled[servers]

    async def on_run_start(self, data: RunStart) -> None:
        """Connect to Kafka before any model call; refuse to run when it cannot."""
        try:
            publisher = await anyio.to_thread.run_sync(Publisher, _settings())
        except Exception as exc:
            _refuse(f"cannot publish results: {exc}")
        resolved = run_tasks()  # reads Inspect's frames: call it here, not in a thread
        try:
            found = eval_tasks(resolved)
        except InspectPluginError as exc:
            await anyio.to_thread.run_sync(publisher.close)
            _refuse(str(exc))
        version = ".".join(map(str, _xbench.inspect_version()))
        worker = WriterProcess(host=socket.gethostname(), pid=os.getpid())
        run = _Run(publisher, Harness(name="inspect_ai", version=version), worker)
        if found is not None:
            run.eval_tasks, run.datasets = found
        self._runs[data.run_id] = run
        if resolved is not None and any(_retries(task) for task in resolved):
            await self._take_over_retries(run, resolved)

    async def _take_over_retries(self, run: _Run, resolved: list[Any]) -> None:
        """Seed Inspect's retries with the topic's pairs their prior logs lack."""
        named = {task.task_id: task for task in run.eval_tasks}
        take_over = partial(retried_tasks, resolved, named, run.publisher, frozenset(_KEYS))
        try:
            run.retried = await anyio.to_thread.run_sync(take_over)
        except Exception as exc:
            self._fail(run, f"cannot read what the retry reuses: {exc}")

    async def on_task_start(self, data: TaskStart) -> None:
        """Name the task's records; a task that cannot be named errors before any model call."""
        run = self._runs.get(data.run_id)
        if run is None:
            return
        spec = data.spec
        try:
            task = TaskRun.of(
                spec,
                data.plan,
                whole=run.datasets.get(spec.task_id),
                benchmark_id=self._benchmark_id(run, spec.task_id),
                siblings=run.eval_tasks,
            )
        except Exception as exc:  # anything: a task we cannot record must not run unrecorded
            self._fail(run, f"cannot record task {spec.task}: {exc}")
        durable_config = _CONFIGS.get(task.run_key)
        if durable_config is not None and durable_config != task.config.canonical:
            differing = differences(json.loads(task.config.canonical), durable_config)
            self._fail(
                run,
                f"{task.run_key}: its durable records were made under another configuration "
                f"({differing}); use a new run id, or `resultlog inspect resume "
                "--accept-config-change` to reuse them as they are",
            )
        for other in run.tasks.values():
            if other.run_key == task.run_key:
                self._fail(run, f"two tasks of the eval would write {task.run_key}")
        try:  # like every writer of a run key: no other holds these samples while we ask
            lease = await anyio.to_thread.run_sync(run.publisher.lease, task.run_key, task.span)
        except LeaseError as exc:
            self._fail(run, f"not running task {spec.task}: {exc}")
        run.leases[data.eval_id] = lease
        run.tasks[data.eval_id] = task
        retried = run.retried.pop(spec.task_id, None)
        if retried is not None and retried.run_key == task.run_key:
            await self._publish_reused(run, task, retried)

    async def _publish_reused(self, run: _Run, task: TaskRun, retried: Retried) -> None:
        """Publish the pairs the retry reuses from its prior log and the topic lacks (they
        were paid for); refuse one whose topic pairs have another configuration."""
        foreign = retried.foreign(task.config.fingerprint)
        if foreign:
            self._fail(
                run,
                f"{task.run_key}: {len(foreign)} durable record(s) the retry would reuse were "
                "made under another configuration; use a new run id",
            )
        try:
            await anyio.to_thread.run_sync(retried.publish_reused, task, run.publisher)
        except Exception as exc:
            where = f"the pairs {task.run_key.benchmark_id} reuses from {retried.prior}"
            self._fail(run, f"could not publish {where}: {exc}", task.run_key)

    @staticmethod
    def _benchmark_id(run: _Run, task_id: str) -> str | None:
        """The benchmark part of the task's run key: a resume's, else the eval's naming."""
        if task_id in _KEYS:
            return _KEYS[task_id].benchmark_id
        named = [t.benchmark_id for t in run.eval_tasks if t.task_id == task_id]
        return named[0] if named else None

    async def on_sample_init(self, data: SampleInit) -> None:
        """Refuse a pair `resultlog inspect resume` found durable (Inspect should reuse it)."""
        task = self._task(data.run_id, data.eval_id)
        if task is None:
            return
        pair = (str(data.summary.id), data.summary.epoch - 1)
        lease = self._runs[data.run_id].leases.get(data.eval_id)
        try:
            if lease is not None:
                lease.check()  # a process that stalled past its lease asks nothing more
        except LeaseError as exc:
            _refuse(str(exc))
        if pair in _DURABLE.get(task.run_key, ()):
            task.refused.add(pair)
            _refuse(
                f"sample {pair[0]} epoch {pair[1]} of {task.run_key} is already "
                "durable in the results log; refusing to ask the model again"
            )

    async def on_before_model_generate(self, data: BeforeModelGenerate) -> None:
        """Stamp x_bench (the dataset sample id and 0-based epoch) on the request."""
        active = _xbench.current()
        if active is not None and _xbench.stamps(data.model_name):
            _xbench.stamp(data.config, *active)

    async def on_sample_end(self, data: SampleEnd) -> None:
        """Publish a completed pair and wait for the broker; keep a degraded one for task end."""
        run = self._runs.get(data.run_id)
        task = self._task(data.run_id, data.eval_id)
        if run is None or task is None:
            return
        sample = data.sample
        if (str(sample.id), sample.epoch - 1) in task.refused:
            return  # never record a pair our own guard failed: it is durable already
        try:
            await anyio.to_thread.run_sync(
                partial(_publish_sample, run, task, sample), abandon_on_cancel=True
            )
        except Exception as exc:
            where = f"sample {sample.id} epoch {sample.epoch - 1} of {task.run_key}"
            self._fail(run, f"could not publish {where}: {exc}", task.run_key)

    async def on_task_end(self, data: TaskEnd) -> None:
        """Only a successful task writes its degraded pairs, once every pair has settled."""
        run = self._runs.get(data.run_id)
        task = run.tasks.pop(data.eval_id, None) if run is not None else None
        if run is None or task is None:
            return
        try:
            if data.log.status == "success" and task.deferred:
                await self._publish_deferred(run, task)
        finally:
            lease = run.leases.pop(data.eval_id, None)
            if lease is not None:
                await anyio.to_thread.run_sync(lease.release)

    async def _publish_deferred(self, run: _Run, task: TaskRun) -> None:
        try:
            await anyio.to_thread.run_sync(
                run.publisher.publish_degraded, task.run_key, task.deferred
            )
        except Exception as exc:
            # Fail-closed on purpose: a run that reports success has every record durable.
            message = f"could not publish the degraded pairs of {task.run_key}: {exc}"
            self._fail(run, message, task.run_key)

    async def on_run_end(self, data: RunEnd) -> None:
        """Flush; then fail the eval (non-zero exit) if any result was not published."""
        run = self._runs.pop(data.run_id, None)
        if run is None:
            return  # Inspect calls this a second time when the first call raised
        if run.tasks or _interrupted(data):  # a Ctrl-C: say the command that continues it
            for run_id in sorted({task.run_key.run_id for task in run.tasks.values()}):
                print(_continue_line(run_id), file=sys.stderr, flush=True)
        for lease in run.leases.values():  # tasks that never reached their end
            await anyio.to_thread.run_sync(lease.release)
        try:
            await anyio.to_thread.run_sync(run.publisher.close)
        except Exception as exc:
            run.failures.append(f"could not flush the results log: {exc}")
        if run.failures and data.exception is None:
            run_ids = sorted(run.failed_run_ids)
            where = f" --run-id {run_ids[0]}" if len(run_ids) == 1 else ""
            _refuse(
                f"{run.failures[0]} ({len(run.failures)} failure(s) in all); the results log "
                f"misses results Inspect's log has: resume with `resultlog inspect resume{where}`"
            )

    def _task(self, run_id: str, eval_id: str) -> TaskRun | None:
        run = self._runs.get(run_id)
        return None if run is None else run.tasks.get(eval_id)

    def _fail(self, run: _Run, message: str, run_key: RunKey | None = None) -> NoReturn:
        log.error("%s%s", _PREFIX, message)
        run.failures.append(message)
        if run_key is not None:
            run.failed_run_ids.add(run_key.run_id)
        _refuse(message)


def _interrupted(data: RunEnd) -> bool:
    """Whether the run ended on a Ctrl-C (its logs cancelled, or the interrupt itself); on
    asyncio Inspect may say neither, but its cancelled tasks never reach their end."""
    if isinstance(data.exception, KeyboardInterrupt | asyncio.CancelledError):
        return True
    return any(log.status == "cancelled" for log in data.logs)


def _continue_line(run_id: str) -> str:
    """What a cancelled eval prints: every finished pair is durable, and how to go on."""
    return (
        f"{_PREFIX}interrupted: every finished sample is durable; continue with "
        f"`resultlog inspect resume --run-id {run_id}` (add --task-file FILE on another machine)"
    )


def _publish_sample(run: _Run, task: TaskRun, sample: EvalSample) -> None:
    """Build the pair's record and publish it, or keep it for task end if degraded (blocks)."""
    record = to_record(task, sample, run.harness, run.worker)
    if record.degraded:
        task.deferred.append(record)
    else:
        run.publisher.publish(record)


def _retries(task: Any) -> bool:
    """Whether Inspect runs the task as a retry of a prior log."""
    return getattr(task.sample_source, "seed", None) is not None


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        raise InspectPluginError(f"invalid RESULTLOG_* settings: {exc}") from exc


def _refuse(message: str) -> NoReturn:
    # The one exception Inspect lets through from a hook: it ends the task (or run) in error.
    raise LimitExceededError("custom", value=1, limit=0, message=f"{_PREFIX}{message}")
