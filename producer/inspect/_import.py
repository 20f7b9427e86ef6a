"""`resultlog inspect import`: Inspect logs put on the topic with the plugin's own mapping.

Each (sample, epoch) of a log, finished or not, becomes the record the plugin would have
written (`to_record` of the task's `TaskRun`). A first pass plans every log against the
topic's durable records: a pair durable already is left alone, one whose durable record
holds another answer, score or configuration refuses the whole import before anything is
written. The second pass leases each run key and writes what the plan says.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from inspect_ai.log import EvalLog, EvalSample, list_eval_logs, read_eval_log

from resultlog.consumers import read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.producer.inspect import _xbench
from resultlog.producer.inspect._errors import InspectPluginError
from resultlog.producer.inspect._eval_tasks import logged_tasks, resolved_base_url
from resultlog.producer.inspect._mapping import to_record
from resultlog.producer.inspect._publisher import Publisher
from resultlog.producer.inspect._task import RUN_METADATA, TaskRun
from resultlog.producer.lease import LeaseError
from resultlog.producer.rescore import stored_answer
from resultlog.schemas import Harness, RunKey, SampleResult, WriterProcess

__all__ = ["ImportConflictError", "ImportedRun", "import_logs", "log_files", "pairs_to_publish"]

Pair = tuple[str, int]  # (sample id, 0-based epoch)


class ImportConflictError(InspectPluginError):
    """A log's pair differs from its durable record: nothing is written."""


class _Held(NamedTuple):
    """What a durable (or planned) record says of its pair, as an import compares it."""

    degraded: bool
    answer: str | None
    score: tuple[str, float | None]
    fingerprint: str | None

    @classmethod
    def of(cls, record: SampleResult) -> _Held:
        score = (str(record.score.value), record.score.numeric)
        return cls(record.degraded, stored_answer(record), score, record.config_fingerprint)


@dataclass
class ImportedRun:
    """One run key of an import: what it writes, what was durable already, from which logs."""

    run_key: RunKey
    written: int = 0  # pairs written (or, in a dry run, that would be)
    degraded: int = 0  # of those, errored samples (degraded records)
    durable: int = 0  # pairs held already: by the topic, or planned from an earlier log
    logs: list[str] = field(default_factory=list)
    span: tuple[int, int] = (0, 1)
    planners: dict[Pair, _Log] = field(default_factory=dict, repr=False)


@dataclass
class _Log:
    """One log file: its task as the plugin keys it, and the pairs to write from it."""

    path: str
    task: TaskRun
    harness: Harness
    planned: set[Pair] = field(default_factory=set)


def log_files(paths: Sequence[str]) -> list[str]:
    """The Inspect log files named: files as given, every log under a directory (by name)."""
    found: list[str] = []
    for path in paths:
        if Path(path).is_dir():
            logs = sorted(info.name for info in list_eval_logs(path, recursive=True))
            if not logs:
                raise InspectPluginError(f"{path} holds no Inspect log (.eval or .json)")
            found += [_local(name) for name in logs]
        elif Path(path).is_file():
            found.append(path)
        else:
            raise InspectPluginError(f"{path}: no such file or directory")
    return list(dict.fromkeys(found))


def import_logs(
    kafka: KafkaConnection,
    paths: Sequence[str],
    *,
    run_id: str | None = None,
    dry_run: bool = False,
    on_log: Callable[[str], None] | None = None,
    on_written: Callable[[int, int], None] | None = None,
) -> list[ImportedRun]:
    """Put the logs' pairs on the topic as the plugin's records; return what each run key got.

    `run_id`: the run every log goes to (default: each eval's `resultlog_run` metadata, else
    RESULTLOG_RUN_ID, else its eval id). ImportConflictError, nothing written, when a pair's
    durable record differs in answer, score or configuration fingerprint.
    """
    logs = _tasks(log_files(paths), run_id)
    runs: dict[RunKey, ImportedRun] = {}
    held: dict[RunKey, dict[Pair, _Held]] = {}
    for number, log in enumerate(logs, 1):
        key = log.task.run_key
        if key not in held:
            held[key] = {_pair_of(r): _Held.of(r) for r in read_run_records(kafka, key).records}
        run = runs.setdefault(key, ImportedRun(key, span=(0, max(1, log.task.dataset_size))))
        run.logs.append(log.path)
        for sample in _samples(log.path):
            record = to_record(log.task, sample, log.harness, _worker())
            _plan(log, run, held[key], record)
        if on_log is not None:
            on_log(f"checked {number}/{len(logs)} logs: {log.path}")
    if not dry_run:
        _write(kafka, logs, runs, on_written)
    return list(runs.values())


def pairs_to_publish(
    task: TaskRun, samples: Iterable[EvalSample], durable: Iterable[SampleResult]
) -> list[SampleResult]:
    """The records of `samples` the topic lacks (a completed one over a degraded one): what an
    Inspect retry reuses from its log without asking, and so without the plugin's hooks."""
    log = _Log("", task, Harness(name="inspect_ai", version=_inspect_version()))
    run = ImportedRun(task.run_key)
    held = {_pair_of(r): _Held.of(r) for r in durable}
    records: dict[Pair, SampleResult] = {}
    for sample in samples:
        record = to_record(task, sample, log.harness, _worker())
        if _plan(log, run, held, record, conflicts=False):
            records[_pair_of(record)] = record
    return [records[pair] for pair in log.planned]


def _plan(
    log: _Log,
    run: ImportedRun,
    held: dict[Pair, _Held],
    record: SampleResult,
    *,
    conflicts: bool = True,
) -> bool:
    """Plan the record's write if its pair needs it; True when planned."""
    pair, new = _pair_of(record), _Held.of(record)
    old = held.get(pair)
    if old is not None and (new.degraded or not old.degraded):
        if conflicts and not (old.degraded or new.degraded):
            _refuse_difference(log, record, old, new)
        run.durable += 1
        return False
    earlier = run.planners.get(pair)
    if earlier is not None:  # a completed record over a degraded one an earlier log planned
        earlier.planned.discard(pair)
        run.degraded -= 1
        run.written -= 1
    held[pair] = new
    run.planners[pair] = log
    log.planned.add(pair)
    run.written += 1
    run.degraded += new.degraded
    return True


def _refuse_difference(log: _Log, record: SampleResult, old: _Held, new: _Held) -> None:
    where = f"{log.path}: sample {record.sample_id} epoch {record.epoch} of {record.run_key}"
    for what, there, here in (
        ("answer", old.answer, new.answer),
        ("score", old.score, new.score),
        ("configuration fingerprint", old.fingerprint, new.fingerprint),
    ):
        if there != here:
            raise ImportConflictError(
                f"{where}: the results log holds another {what} ({there!r} there, {here!r} "
                "here); nothing written (import it as another run with --run-id)"
            )


def _write(
    kafka: KafkaConnection,
    logs: list[_Log],
    runs: dict[RunKey, ImportedRun],
    on_written: Callable[[int, int], None] | None,
) -> None:
    """Lease every run key written to, then write each log's planned pairs."""
    total = sum(run.written for run in runs.values())
    if total == 0:
        return
    publisher = Publisher(kafka.settings)
    leases = []
    try:
        for run in runs.values():
            if run.written:
                try:
                    leases.append(publisher.lease(run.run_key, run.span))
                except LeaseError as exc:
                    raise InspectPluginError(f"not importing {run.run_key}: {exc}") from exc
        done = 0
        for log in logs:
            if not log.planned:
                continue
            records = [
                to_record(log.task, sample, log.harness, _worker())
                for sample in _samples(log.path)
                if _pair_of_sample(sample) in log.planned
            ]
            for written in publisher.publish_all(records):
                done += written
                if on_written is not None:
                    on_written(done, total)
    finally:
        for lease in leases:
            lease.release()
        publisher.close()


def _tasks(paths: list[str], run_id: str | None) -> list[_Log]:
    """Each log's task as the plugin would key it (the run id given, if any)."""
    headers = [_header(path) for path in paths]
    specs = [h.eval for h in headers]
    if run_id is not None:
        specs = [
            s.model_copy(update={"metadata": {**(s.metadata or {}), RUN_METADATA: run_id}})
            for s in specs
        ]
    base_urls = {
        s.task_id: s.model_base_url or resolved_base_url(s.model, None, dict(s.model_args))
        for s in specs
    }
    tasks = logged_tasks(specs, base_urls)
    logs = []
    for path, header, spec in zip(paths, headers, specs, strict=True):
        named = next(t for t in tasks if t.task_id == spec.task_id and t.model == spec.model)
        try:
            task = TaskRun.of(spec, header.plan, benchmark_id=named.benchmark_id, siblings=[named])
        except InspectPluginError as exc:
            raise InspectPluginError(f"{path}: {exc}") from exc
        version = (spec.packages or {}).get("inspect_ai") or _inspect_version()
        logs.append(_Log(path, task, Harness(name="inspect_ai", version=version)))
    return logs


def _header(path: str) -> EvalLog:
    try:
        return read_eval_log(path, header_only=True)
    except Exception as exc:  # Inspect's own: not a log, a log of another version
        raise InspectPluginError(f"{path}: not an Inspect log Inspect can read ({exc})") from exc


def _samples(path: str) -> Iterator[EvalSample]:
    """The log's samples, as many as it holds (an unfinished log holds those flushed)."""
    try:
        log = read_eval_log(path)
    except Exception as exc:
        raise InspectPluginError(f"{path}: cannot read its samples ({exc})") from exc
    yield from log.samples or ()


def _pair_of(record: SampleResult) -> Pair:
    return record.sample_id, record.epoch


def _pair_of_sample(sample: EvalSample) -> Pair:
    return str(sample.id), sample.epoch - 1


def _worker() -> WriterProcess:
    return WriterProcess(host=socket.gethostname(), pid=os.getpid())


def _inspect_version() -> str:
    return ".".join(map(str, _xbench.inspect_version()))


def _local(name: str) -> str:
    """A listed log's path (Inspect lists local files as file:// URLs)."""
    return name.removeprefix("file://")
