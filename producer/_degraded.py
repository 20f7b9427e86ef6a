"""Degraded writes that never shadow a completed record, whoever else writes the run key.

Another writer of the same run key (a retried chunk beside a live one, a process whose lease
expired while it was paused) may make a key completed while this run holds a degraded outcome
for it. So, once every pair has settled:

1. read the keys' histories; a key whose latest record is completed is not written (its
   degraded outcome is superseded); a key whose completed record lies under a degraded one
   gets that completed record written again;
2. write the remaining degraded records, one at a time;
3. read the histories of the keys written and write again, byte for byte, any completed
   record that now lies under a degraded one: a writer that completed a key between our read
   and our write. The completed record is then the latest again, and compaction keeps it.

Every writer checks after its own last degraded write, so whichever degraded record of a key
comes last in the log, its writer sees the completed one beneath it and restores it.
Remaining race: a writer that dies between writing a degraded record and checking (a SIGKILL
or power loss within about one read of the partition) leaves that key shadowed; the next run
evaluates the pair again (pays for it once more), and restores it if that answer degrades too.
Writers that skip this check (other tools writing the topic) are not covered.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from resultlog.consumers import KeyHistory
from resultlog.producer._retry import WritePolicy
from resultlog.producer.store import HistoryStore, ResultStore
from resultlog.schemas import RunKey, SampleResult

__all__ = ["DegradedWrites", "persist_degraded"]

_Pair = tuple[int, int]


@dataclass(frozen=True)
class DegradedWrites:
    """What became of a run's degraded outcomes."""

    written: tuple[SampleResult, ...] = ()
    # The completed records other writers made durable for keys this run saw degraded.
    superseded: tuple[SampleResult, ...] = ()
    restored: int = 0


async def persist_degraded(
    store: ResultStore, policy: WritePolicy, run_key: RunKey, records: Sequence[SampleResult]
) -> DegradedWrites:
    """Write the degraded records, one at a time, never over a completed one."""
    records = sorted(records, key=lambda record: (record.sample_index, record.epoch))
    if not records:  # nothing to write: no read of the log either
        return DegradedWrites()
    if not isinstance(store, HistoryStore):  # a store of one writer: nothing can interleave
        for record in records:
            await policy.write(store, record)
        return DegradedWrites(written=tuple(records))
    before = await _histories(store, policy, run_key, [_pair(r) for r in records])
    restored = await _restore_shadowed(store, policy, before.values())
    to_write = [r for r in records if before[_pair(r)].completed is None]
    superseded = {pair: h.completed for pair, h in before.items() if h.completed is not None}
    for record in to_write:
        await policy.write(store, record)
    if to_write:
        after = await _histories(store, policy, run_key, [_pair(r) for r in to_write])
        restored += await _restore_shadowed(store, policy, after.values())
        superseded |= {pair: h.completed for pair, h in after.items() if h.completed is not None}
    return DegradedWrites(
        written=tuple(r for r in to_write if _pair(r) not in superseded),
        superseded=tuple(record for record in superseded.values() if record is not None),
        restored=restored,
    )


async def _histories(
    store: HistoryStore, policy: WritePolicy, run_key: RunKey, pairs: list[_Pair]
) -> Mapping[_Pair, KeyHistory]:
    what = f"read the log of {run_key} around its degraded outcomes"
    return await policy.retry(what, lambda: store.histories(run_key, pairs))


async def _restore_shadowed(
    store: HistoryStore, policy: WritePolicy, histories: Iterable[KeyHistory]
) -> int:
    """Write again every completed record that lies under a degraded one; return how many."""
    restored = 0
    for history in histories:
        completed, value = history.completed, history.completed_value
        if not history.shadowed or completed is None or value is None:
            continue

        async def restore(record: SampleResult = completed, raw: bytes = value) -> None:
            await store.restore(record, raw)

        await policy.retry(f"restore sample {completed.sample_id} epoch {completed.epoch}", restore)
        restored += 1
    return restored


def _pair(record: SampleResult) -> _Pair:
    return record.sample_index, record.epoch
