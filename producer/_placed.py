"""Durable records matched to the dataset by sample id, never by position.

A record's key holds the sample's index in the dataset it was made from. When the dataset
changes under a run (a line deleted or moved, reused with `--accept-config-change`), the
record at an index may belong to another sample: it is never reused there. A record of a
sample that now sits at another index is copied to that index (no model call: the answer is
the sample's), so the sample keeps its answer and the stale key is overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime

from resultlog.producer._retry import WritePolicy
from resultlog.producer.store import ResultStore
from resultlog.schemas import FoldView, SampleResult

__all__ = ["placed", "relocate"]

_Durable = SampleResult | FoldView


def placed(record: _Durable, ids: Mapping[int, str]) -> bool:
    """Whether the record's index holds its sample in the current dataset."""
    return ids.get(record.sample_index) == record.sample_id


async def relocate(
    store: ResultStore,
    policy: WritePolicy,
    records: Sequence[_Durable],
    *,
    ids: Mapping[int, str],
    indexes: Collection[int],
    whole: Callable[[FoldView], SampleResult] | None,
) -> int:
    """Copy each record of a sample that moved to its sample's index; return how many."""
    index_of = {sample_id: index for index, sample_id in ids.items()}
    here = {(r.sample_index, r.epoch) for r in records if placed(r, ids)}
    copied = 0
    now = datetime.now(UTC)
    for record in records:
        index = index_of.get(record.sample_id)
        if index is None or index == record.sample_index or index not in indexes:
            continue  # a sample no longer in the dataset, in place, or another chunk's
        if (index, record.epoch) in here:
            continue  # the sample has a record at its index already
        full = record if isinstance(record, SampleResult) else _whole(record, whole)
        # Now, so the newest record (which gives the run's shape) carries the new size.
        moved = {"sample_index": index, "dataset_size": len(ids), "created_at": now}
        copy = full.model_copy(update=moved)
        await policy.write(store, copy)
        here.add((index, record.epoch))
        copied += 1
    return copied


def _whole(view: FoldView, whole: Callable[[FoldView], SampleResult] | None) -> SampleResult:
    if whole is None:
        raise ValueError("a fold view needs its whole record to be copied")
    return whole(view)
