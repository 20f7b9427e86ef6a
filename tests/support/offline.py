"""Picking sample ids by the outcome the offline model server gives them."""

from __future__ import annotations

from resultlog.producer.offline import Outcome, expected_outcome


def pair_with(outcome: Outcome, *, epoch: int = 0, prefix: str = "probe") -> str:
    """The first sample id `prefix-N` whose default outcome at `epoch` is `outcome`."""
    for i in range(100_000):
        sample_id = f"{prefix}-{i}"
        if expected_outcome(sample_id, epoch) == outcome:
            return sample_id
    raise AssertionError(f"no {outcome} pair found")
