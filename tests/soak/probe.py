"""One checker round: what each aggregator instance serves as fresh, compared with replay at
the same offsets, and the model server's request log judged against the attempts."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from resultlog.schemas import RunKey
from tests.soak.checker import Ask, Served, Violation, repeated_asks, served_violation
from tests.soak.cluster import Aggregator
from tests.soak.history import LogTail, RequestLog
from tests.soak.workload import Workload

__all__ = ["Plant", "Probe"]

_HTTP_TIMEOUT_S = 3.0


@dataclass
class Plant:
    """SOAK_PLANT=1: a wrong served summary and a repeated request, put into what the
    checker reads once each, so that a soak that finds nothing proves it could."""

    enabled: bool
    planted: set[str] = field(default_factory=set)
    _ask: Ask | None = None

    def served(self, found: list[Served]) -> list[Served]:
        """The served summaries, one of them made wrong (once)."""
        if not self.enabled or "served" in self.planted or not found:
            return found
        self.planted.add("served")
        first = found[0]
        wrong = {**first.summary, "correct_answers": first.summary["correct_answers"] + 1}
        planted = Served(first.instance, first.run_id, wrong, first.partition, first.offset)
        return [planted, *found[1:]]

    def asks(self, asks: list[Ask], eligible: Callable[[Ask], bool]) -> list[Ask]:
        """The request log with the first eligible request written twice (a line repeated
        in place, so by the same attempt), once there is one."""
        if not self.enabled:
            return asks
        if self._ask is None:
            found = [ask for ask in asks if eligible(ask)]
            if not found:
                return asks
            self.planted.add("asks")
            self._ask = found[0]
        at = asks.index(self._ask) + 1
        return [*asks[:at], self._ask, *asks[at:]]


class Probe:
    """Checks, callable from the checker's thread: `round()` returns its violations and
    whether it compared at least one run served fresh."""

    def __init__(
        self,
        aggregators: list[Aggregator],
        workload: Workload,
        tail: LogTail,
        requests: RequestLog,
        degraded: Callable[[str, int], bool],
        plant: Plant,
        clock: Callable[[], float],
    ) -> None:
        self._aggregators, self._workload, self._tail = aggregators, workload, tail
        self._requests, self._degraded, self._plant, self._clock = requests, degraded, plant, clock
        self._http = httpx.Client(timeout=_HTTP_TIMEOUT_S)
        self.compared = 0
        self.lock = threading.Lock()

    def round(self) -> tuple[list[Violation], int]:
        """One round; its violations and how many fresh runs it compared."""
        found: list[Violation] = []
        served = self._plant.served(self._served())
        compared = 0
        for item in served:
            run_key = RunKey(item.run_id, item.summary["benchmark_id"], item.summary["model"])
            try:
                replayed = self._tail.replay(run_key, item.partition, item.offset)
            except TimeoutError:
                continue
            compared += 1
            bad = served_violation(item, replayed, self._purged_end(item.run_id), self._clock())
            if bad is not None:
                found.append(bad)
        found += self.repeats()
        self.compared += compared
        return found, compared

    def repeats(self) -> list[Violation]:
        """Pairs asked again that no kill excuses."""
        attempts = self._workload.attempts()
        asks = self._requests.asks()

        def eligible(ask: Ask) -> bool:  # a request of ours that no rule excuses twice
            return ask.model in attempts and not self._degraded(ask.sample_id, ask.epoch)

        asks = self._plant.asks(asks, eligible)
        return repeated_asks(asks, attempts, self._degraded, self._clock())

    def _served(self) -> list[Served]:
        """Every summary an up instance serves as fresh now."""
        found: list[Served] = []
        for aggregator in self._aggregators:
            if not aggregator.up:
                continue
            try:
                response = self._http.get(f"{aggregator.url}/runs", params={"limit": 1000})
            except httpx.HTTPError:
                continue
            if response.status_code != 200:
                continue
            for summary in response.json():
                offsets = (summary.get("as_of") or {}).get("offsets") or {}
                if summary.get("stale") or len(offsets) != 1:
                    continue
                ((partition, offset),) = offsets.items()
                body = {k: v for k, v in summary.items() if k not in ("as_of", "stale")}
                run_id = summary["run_id"]
                found.append(Served(aggregator.name, run_id, body, int(partition), offset))
        return found

    def requests(self) -> int:
        """Requests the model server logged."""
        return self._requests.refresh()

    def _purged_end(self, run_id: str) -> int | None:
        run = self._workload.runs.get(run_id)
        return None if run is None else run.purged_end

    def close(self) -> None:
        """Close the HTTP client."""
        self._http.close()
