"""The soak's judgements, pure: served and printed summaries against replay, and the model
server's request log against the attempts that asked it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Ask",
    "Attempt",
    "Served",
    "Violation",
    "repeated_asks",
    "served_violation",
    "summary_diff",
    "worker_violation",
]

Pair = tuple[str, int]  # (sample_id, epoch)
Summary = dict[str, Any]
# Fields that say when and by whom a summary was made, not what it says.
_FRESHNESS = ("as_of", "stale")
# What a purged run's summary is shown with when it is served all the same.
_SHOWN = ("records", "degraded_records", "correct_answers", "spent_cost", "out_of_shape")


@dataclass(frozen=True)
class Violation:
    """One broken rule: its kind, what was seen, and when (seconds into the soak)."""

    kind: str
    detail: str
    at_s: float = 0.0

    def line(self) -> str:
        """One line for people."""
        return f"[{self.at_s:7.1f}s] {self.kind}: {self.detail}"


@dataclass(frozen=True)
class Served:
    """A summary an aggregator instance served as fresh, with the offsets it reflects."""

    instance: str
    run_id: str
    summary: Summary
    partition: int
    offset: int


@dataclass(frozen=True)
class Ask:
    """One line of the model server's request log: the run (by its model) and the pair."""

    line: int
    model: str
    sample_id: str
    epoch: int


@dataclass
class Attempt:
    """One `resultlog run` process of a run: the request-log lines from `log_start` on are
    its own (attempts of a run never overlap); `durable_after` holds the pairs whose latest
    record was complete once it ended (None while it runs, or when it succeeded)."""

    model: str
    generation: int  # how many times the run had been purged when the attempt started
    log_start: int
    durable_after: frozenset[Pair] | None = None
    ended: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def summary_diff(served: Summary, replayed: Summary | None) -> list[str]:
    """The fields in which two summaries differ (freshness aside); a missing replay (no
    records) differs in every field."""
    if replayed is None:
        return ["the log holds no records of the run at these offsets"]
    keys = sorted((set(served) | set(replayed)) - set(_FRESHNESS))
    return [
        f"{key} {served.get(key)!r} != replay {replayed.get(key)!r}"
        for key in keys
        if served.get(key) != replayed.get(key)
    ]


def served_violation(
    served: Served, replayed: Summary | None, purged_before: int | None, at_s: float
) -> Violation | None:
    """A fresh summary that is not replay's at its offsets; named a purged run served when
    the run's purge ended before those offsets (`purged_before`)."""
    diff = summary_diff(served.summary, replayed)
    if not diff:
        return None
    where = f"{served.instance} served {served.run_id} at p{served.partition}@{served.offset}"
    if replayed is None and purged_before is not None and served.offset >= purged_before:
        shown = ", ".join(f"{k} {served.summary.get(k)!r}" for k in _SHOWN if k in served.summary)
        detail = f"{where} (purged up to {purged_before}): {shown}"
        return Violation("purged run served", detail, at_s)
    return Violation("served != replay", f"{where}: {'; '.join(diff)}", at_s)


def worker_violation(
    run_id: str, printed: Summary, replayed: Summary | None, at_s: float
) -> Violation | None:
    """A summary a worker printed on success that is not replay's."""
    diff = summary_diff(printed, replayed)
    if not diff:
        return None
    return Violation("worker summary != replay", f"{run_id}: {'; '.join(diff)}", at_s)


def repeated_asks(
    asks: Iterable[Ask],
    attempts: Mapping[str, list[Attempt]],
    degraded: Callable[[str, int], bool],
    at_s: float,
) -> list[Violation]:
    """Pairs asked again that no kill excuses: twice by one attempt, or by a later attempt of
    the same generation although an earlier one had made them durable. Pairs the model
    always fails (`degraded`) are retried by design; asks of models no attempt ran are
    ignored (another client's)."""
    found: list[Violation] = []
    asked: dict[tuple[str, int, Pair], list[int]] = {}
    per_attempt: Counter[tuple[str, int, Pair]] = Counter()
    for ask in asks:
        runs = attempts.get(ask.model)
        pair = (ask.sample_id, ask.epoch)
        index = _attempt_of(runs, ask.line) if runs else None
        if runs is None or index is None or degraded(*pair):
            continue
        generation = runs[index].generation
        per_attempt[(ask.model, index, pair)] += 1
        if per_attempt[(ask.model, index, pair)] == 2:
            found.append(Violation("pair asked twice", _said(ask, "twice by one attempt"), at_s))
        earlier = asked.setdefault((ask.model, generation, pair), [])
        for before in earlier:
            durable = runs[before].durable_after
            if before != index and durable is not None and pair in durable:
                why = f"again by attempt {index + 1} though durable after attempt {before + 1}"
                found.append(Violation("pair asked twice", _said(ask, why), at_s))
                break
        if index not in earlier:
            earlier.append(index)
    return found


def _attempt_of(runs: list[Attempt], line: int) -> int | None:
    """The attempt a request-log line belongs to: the last one started at or before it."""
    index = None
    for i, attempt in enumerate(runs):
        if attempt.log_start <= line:
            index = i
    return index


def _said(ask: Ask, why: str) -> str:
    return f"{ask.model} sample {ask.sample_id} epoch {ask.epoch} (log line {ask.line}) {why}"
