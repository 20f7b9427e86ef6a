"""The admission rule of budgets, local and shared: pure logic, with writers interleaved at
random around one ledger (log order as Kafka keeps it; no broker needed for the rule)."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from resultlog.producer._budget import bounded_estimate, verdict
from resultlog.producer._shared_budget import SharedBudget
from resultlog.producer.spend import LedgerEntry, Seen, SpendLedger

FAR = 2**62  # an expiry that never passes


def test_a_pair_starts_only_within_the_budget() -> None:
    limit, cost = Fraction(10), Fraction(3)
    assert verdict(limit, Fraction(4), [cost], cost, probing=False) is True
    assert verdict(limit, Fraction(5), [cost], cost, probing=False) is None  # wait for it
    assert verdict(limit, Fraction(8), [], cost, probing=False) is False
    assert verdict(limit, Fraction(0), [Fraction(0)], Fraction(0), probing=True) is None
    assert verdict(Fraction(0), Fraction(0), [], Fraction(0), probing=True) is False


def test_a_bound_stands_in_for_an_unknown_cost() -> None:
    assert bounded_estimate(Fraction(0), None, True) == (Fraction(0), True)
    assert bounded_estimate(Fraction(0), Fraction(5), True) == (Fraction(5), False)
    assert bounded_estimate(Fraction(2), Fraction(5), True) == (Fraction(2), False)


@dataclass
class _Log:
    """One run key's ledger partition: entries in log order, and each pair's latest."""

    entries: list[tuple[tuple[int, int], LedgerEntry]] = field(default_factory=list)

    def append(self, pair: tuple[int, int], entry: LedgerEntry) -> int:
        self.entries.append((pair, entry))
        return len(self.entries) - 1

    def read_to(self, end: int) -> SpendLedger:
        """A writer's view after reading the first `end` entries."""
        view = _View()
        for offset, (pair, entry) in enumerate(self.entries[:end]):
            view.pairs[pair] = Seen(offset, entry)
            view.changed.append(pair)
        return cast(SpendLedger, view)


@dataclass
class _View:
    pairs: dict[tuple[int, int], Seen] = field(default_factory=dict)
    changed: list[tuple[int, int]] = field(default_factory=list)


def _budget(ledger: SpendLedger, limit: int, max_pair: float | None) -> SharedBudget:
    return SharedBudget(ledger, {}, limit_usd=limit, probe=4, max_pair_usd=max_pair, ttl_s=60.0)


_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["reserve", "decide", "settle"]), st.integers(0, 3), st.integers(0, 99)
    ),
    min_size=8,
    max_size=120,
)


@settings(max_examples=400)
@given(steps=_STEPS, limit=st.integers(0, 40), cost=st.integers(1, 7))
def test_writers_interleaved_never_pass_the_budget(
    steps: list[tuple[str, int, int]], limit: int, cost: int
) -> None:
    """Four writers reserve, decide (each reading the log to some point past its own
    reservation) and settle in any order: what the admitted pairs cost never passes it."""
    log = _Log()
    pending: dict[int, tuple[tuple[int, int], int]] = {}  # writer: its undecided reservation
    flying: dict[int, list[tuple[int, int]]] = {w: [] for w in range(4)}
    paid = 0
    for n, (step, writer, pick) in enumerate(steps):
        if step == "reserve" and writer not in pending:
            pair = (n, 0)
            entry = LedgerEntry(state="reserved", spent=0.0, reserved=cost, expires_ms=FAR)
            pending[writer] = (pair, log.append(pair, entry))
        elif step == "decide" and writer in pending:
            pair, offset = pending.pop(writer)
            read = offset + 1 + pick % (len(log.entries) - offset)  # reads on past its own
            decided = _budget(log.read_to(read), limit, cost).decide(pair, before=offset)
            if decided:
                flying[writer].append(pair)
            else:
                log.append(pair, LedgerEntry(state="settled", spent=0.0))
        elif step == "settle" and flying[writer]:
            pair = flying[writer].pop(pick % len(flying[writer]))
            log.append(pair, LedgerEntry(state="settled", spent=cost, ran=True))
            paid += cost
        in_flight = sum(len(pairs) for pairs in flying.values())
        assert paid + in_flight * cost <= limit


def test_an_unknown_cost_is_learnt_from_one_pair_whatever_the_writers() -> None:
    log = _Log()
    first, second = (0, 0), (1, 0)
    unknown = LedgerEntry(state="reserved", spent=0.0, expires_ms=FAR)
    at_first, at_second = log.append(first, unknown), log.append(second, unknown)
    assert _budget(log.read_to(2), 10, None).decide(first, before=at_first) is True
    # The second writer sees the first pair in flight at an unknown cost: it waits.
    assert _budget(log.read_to(2), 10, None).decide(second, before=at_second) is None
    for withdrawn in range(2, 8):  # reservations withdrawn before any call: no cost learnt
        log.append((withdrawn, 0), LedgerEntry(state="settled", spent=0.0))
    assert _budget(log.read_to(8), 10, None).decide(second) is None
    log.append(first, LedgerEntry(state="settled", spent=6.0, ran=True))
    # Once it is known, its cost is the estimate: 6 + 6 would pass 10, so nothing more.
    assert _budget(log.read_to(9), 10, None).decide(second) is False
    # A bound above the budget starts nothing, even the first pair.
    assert _budget(_Log().read_to(0), 10, 11.0).decide(first) is False
