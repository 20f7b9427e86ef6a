"""Inspect's own retries (`inspect eval-retry`, an `eval_set` rerun) with the plugin on.

Inspect reuses the clean samples of the log it retries without running them, so no hook sees
them: those the topic lacks are published when their task starts (they were paid for). A
pair the topic holds that the prior log lacks (published, then the eval stopped before
Inspect logged it, or written by another process) is added to a copy of the prior log that
the retry is seeded from instead (in memory), so Inspect reuses it rather than asking the
model again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from inspect_ai.log import EvalLog, EvalSample, read_eval_log

from resultlog.producer.inspect._eval_tasks import EvalTask
from resultlog.producer.inspect._import import pairs_to_publish
from resultlog.producer.inspect._payload import decode
from resultlog.producer.inspect._publisher import Publisher
from resultlog.producer.inspect._task import TaskRun, run_id_of
from resultlog.schemas import RunKey, SampleResult

__all__ = ["Retried", "retried_tasks"]

Pair = tuple[str, int]  # (sample id, 0-based epoch)
_HARNESS = "inspect_ai"


@dataclass
class Retried:
    """A task Inspect retries from a prior log: what it reuses, what the topic held."""

    run_key: RunKey
    prior: str  # the prior log's path
    reused: list[EvalSample]  # the prior log's clean samples: Inspect reuses them unasked
    durable: list[SampleResult]  # the run key's records when the eval started
    added: list[SampleResult] = field(default_factory=list)  # topic pairs added to the seed

    def publish_reused(self, task: TaskRun, publisher: Publisher) -> int:
        """Publish the reused pairs the topic lacks under the task's mapping; how many."""
        records = pairs_to_publish(task, self.reused, self.durable)
        for _ in publisher.publish_all(records):
            pass
        return len(records)

    def foreign(self, fingerprint: str) -> list[SampleResult]:
        """The topic's records added to the seed that were made under another configuration."""
        return [r for r in self.added if r.config_fingerprint not in (None, fingerprint)]


def retried_tasks(
    tasks: Iterable[Any],
    named: Mapping[str, EvalTask],
    publisher: Publisher,
    skip: frozenset[str] = frozenset(),
) -> dict[str, Retried]:
    """Each Inspect ResolvedTask retried from a prior log (by task id), its seed made to hold
    the topic's pairs the prior log lacks; `skip`: task ids left as they are."""
    found: dict[str, Retried] = {}
    for task in tasks:
        source = task.sample_source
        prior = _prior_log(source) if task.id not in skip else None
        if prior is None:
            continue  # a fresh task, sample logging off, a resume's own
        spec = prior.eval
        benchmark = named[task.id].benchmark_id if task.id in named else spec.task
        run_key = RunKey(run_id_of(spec), benchmark, str(task.model))
        durable = publisher.records(run_key)
        clean = [s for s in prior.samples or () if _clean(s)]
        retried = Retried(run_key, prior.location, clean, durable)
        retried.added = _missing(durable, {_pair(s) for s in clean})
        if retried.added:
            _seed_from(task, prior, retried.added)
        found[task.id] = retried
    return found


def _prior_log(source: Any) -> EvalLog | None:
    """The log (with its samples) Inspect's sample source seeds a retry from: a log file, or
    the log eval-retry read (held by the source's lookup); None when it seeds none."""
    seed = getattr(source, "seed", None)
    if seed is None:
        return None
    if isinstance(seed.source, str):
        return read_eval_log(seed.source)
    cells = getattr(source.lookup, "__closure__", None) or ()
    held = [cell.cell_contents for cell in cells if isinstance(cell.cell_contents, EvalLog)]
    return held[0] if held else None


def _missing(durable: list[SampleResult], logged: set[Pair]) -> list[SampleResult]:
    """The topic's completed Inspect records of pairs the prior log holds no clean sample of."""
    return [
        r
        for r in durable
        if not r.degraded
        and (r.sample_id, r.epoch) not in logged
        and r.harness_payload is not None
        and r.harness is not None
        and r.harness.name == _HARNESS
    ]


def _seed_from(task: Any, prior: EvalLog, added: list[SampleResult]) -> None:
    """Seed the task's retry from the prior log's samples and the added pairs (in memory)."""
    from inspect_ai._eval.task.run import eval_log_sample_source

    replaced = {(r.sample_id, r.epoch) for r in added}
    samples = [s for s in prior.samples or () if _pair(s) not in replaced]
    samples += [decode(r.harness_payload or b"").sample for r in added]
    seeded = prior.model_copy(update={"samples": samples})
    checkpoints = task.sample_source.prior_checkpoints_dir
    source = eval_log_sample_source(seeded, None, task.task.dataset, checkpoints)
    object.__setattr__(task, "sample_source", source)  # Inspect's ResolvedTask is frozen


def _clean(sample: EvalSample) -> bool:
    """Whether Inspect's retry reuses the sample (as its own sample source decides)."""
    return sample.error is None and sample.invalidation is None


def _pair(sample: EvalSample) -> Pair:
    return str(sample.id), sample.epoch - 1
