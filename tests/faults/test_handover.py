"""A hand-over never answers 404 for a run that exists: two aggregators of one group, one
SIGSTOPped until the other has taken its partitions, then SIGCONTed so they move back; every
run, polled every 50 ms on both instances throughout, is served (marked stale while no
instance holds its partition fresh) and equals replay."""

from __future__ import annotations

import itertools
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import httpx
import pytest

from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey, partition_for
from resultlog.settings import Settings
from tests.support.aggregator import path
from tests.support.aggregator_process import Member, health, member, two_epoch_records
from tests.support.kafka import topic_settings, write_many
from tests.support.summaries import bare, expected, published
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.timeout(600)]

PARTITIONS = 4
POLL_S = 0.05
SETTLED_S = 3.0  # both members ready with the partitions split, this long: the end


@pytest.fixture
def pair_settings(kafka_bootstrap: str, unique_name: str, tmp_path: Path) -> Iterator[Settings]:
    """This test's topics, four partitions, state under tmp_path."""
    made = topic_settings(
        kafka_bootstrap, unique_name, partitions=PARTITIONS, aggregator_state_dir=tmp_path
    )
    yield made
    with KafkaConnection(made) as kafka:
        kafka.admin().delete_topics(made.every_topic())


def _one_run_per_partition() -> list[RunKey]:
    """A run key in each partition."""
    found: dict[int, RunKey] = {}
    for i in itertools.count():
        run_key = RunKey(f"handover-{i}", "arith", "openai/gpt-4o")
        found.setdefault(partition_for(run_key, PARTITIONS), run_key)
        if len(found) == PARTITIONS:
            return [found[p] for p in sorted(found)]
    raise AssertionError("unreachable")


class _Poller:
    """Polls every run on the given members, asserting each answer equals replay."""

    def __init__(self, runs: list[RunKey], want: Mapping[RunKey, object]) -> None:
        self.runs = runs
        self.want = want
        self.answers: Counter[str] = Counter()

    def round(self, members: list[Member]) -> None:
        """One poll of every run on every member; then a pause of POLL_S."""
        for agg, run_key in itertools.product(members, self.runs):
            response = httpx.get(agg.url + path(run_key), timeout=10)
            assert response.status_code == 200, (run_key, response.status_code, response.text)
            body = response.json()
            stale = body.pop("stale", False)
            assert bare(body) == self.want[run_key], (run_key, body)
            self.answers["stale" if stale else "fresh"] += 1
        time.sleep(POLL_S)

    def until(
        self, members: list[Member], done: Callable[[], bool], what: str, timeout_s: float
    ) -> None:
        """Poll until `done()` is true (checked every ~0.5 s)."""
        deadline = time.monotonic() + timeout_s
        while True:
            checked = time.monotonic() + 0.5
            while time.monotonic() < checked:
                self.round(members)
            if done():
                return
            assert time.monotonic() < deadline, f"timed out waiting for {what}"


def _holds(agg: Member) -> set[int]:
    found = health(agg)
    return {int(p) for p in found["partitions"]} if found["ready"] else set()


def test_a_sigstop_hand_over_never_answers_404(pair_settings: Settings) -> None:
    """SIGSTOP one member until the other holds every partition, SIGCONT it: every run,
    polled every 50 ms on both, is served equal to replay; never 404."""
    runs = _one_run_per_partition()
    write_many(pair_settings, two_epoch_records(runs, range(400)))
    want = {k: expected(pair_settings, k) for k in runs}
    every = set(range(PARTITIONS))
    with member(pair_settings, "a") as a, member(pair_settings, "b") as b:

        def split() -> bool:
            held = _holds(a)
            return bool(held) and held | _holds(b) == every

        def published_equal() -> bool:
            on_topic = published(pair_settings)
            return all(any(m.served(k) for m in (a, b)) for k in runs) and all(
                on_topic.get(k) == want[k] for k in runs
            )

        wait_for(split, "both members ready with the partitions split", 120)
        wait_for(published_equal, "each run served fresh and published", 120)
        poller = _Poller(runs, want)
        poller.round([a, b])
        a.process.send_signal(signal.SIGSTOP)
        try:
            poller.until([b], lambda: _holds(b) == every, "b to hold every partition", 120)
        finally:
            a.process.send_signal(signal.SIGCONT)
        settled_since: list[float] = []

        def settled() -> bool:
            if not split():
                settled_since.clear()
                return False
            settled_since[:1] = settled_since[:1] or [time.monotonic()]
            return time.monotonic() - settled_since[0] >= SETTLED_S

        poller.until([a, b], settled, "the partitions split again", 120)
    assert poller.answers["stale"] > 0, poller.answers  # the hand-over was polled through
