"""Request context: scoping, restoring, and isolation between concurrent tasks."""

from __future__ import annotations

import asyncio
import random
from concurrent.futures import ThreadPoolExecutor

import pytest

from resultlog.producer.context import SampleContext, current_sample, sample_scope


def test_no_context_outside_any_scope() -> None:
    assert current_sample() is None


def test_scope_sets_and_restores_nested_values() -> None:
    with sample_scope("a", 0) as outer:
        assert outer == SampleContext("a", 0)
        assert current_sample() == outer
        with sample_scope("b", 2):
            assert current_sample() == SampleContext("b", 2)
        assert current_sample() == outer
    assert current_sample() is None


def test_scope_is_reset_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError), sample_scope("a", 1):
        raise RuntimeError("boom")
    assert current_sample() is None


@pytest.mark.parametrize(("sample_id", "epoch"), [("", 0), ("a", -1), ("a", True), (3, 0)])
def test_scope_rejects_invalid_identity(sample_id: object, epoch: object) -> None:
    with pytest.raises(ValueError):
        sample_scope(sample_id, epoch).__enter__()  # type: ignore[arg-type]  # deliberately ill-typed: the check at run time is under test


def test_context_is_frozen() -> None:
    ctx = SampleContext("a", 0)
    with pytest.raises(AttributeError):
        ctx.epoch = 1  # type: ignore[misc]  # deliberately: that it refuses is under test


async def test_concurrent_tasks_never_see_each_others_sample() -> None:
    rng = random.Random(3)
    delays = {
        (f"s{i}", e): [rng.random() / 500 for _ in range(4)] for i in range(100) for e in range(3)
    }

    async def solve(sample_id: str, epoch: int) -> list[SampleContext | None]:
        seen = []
        with sample_scope(sample_id, epoch):
            for delay in delays[(sample_id, epoch)]:
                await asyncio.sleep(delay)
                seen.append(current_sample())
        return seen

    pairs = list(delays)
    results = await asyncio.gather(*(solve(s, e) for s, e in pairs))
    for (sample_id, epoch), seen in zip(pairs, results, strict=True):
        assert seen == [SampleContext(sample_id, epoch)] * 4
    assert current_sample() is None


async def test_child_tasks_inherit_the_scope_of_their_creator() -> None:
    async def child() -> SampleContext | None:
        await asyncio.sleep(0)
        return current_sample()

    with sample_scope("parent", 1):
        task = asyncio.create_task(child())
    assert await task == SampleContext("parent", 1)


def test_threads_do_not_share_the_scope() -> None:
    def probe() -> SampleContext | None:
        return current_sample()

    with sample_scope("main", 0), ThreadPoolExecutor(1) as pool:
        assert pool.submit(probe).result() is None
