"""The runs page's per-sample views, read from the log on demand and kept per run.

`SampleCache` reads the run key's latest records from its one partition (the resume reader)
when asked and keeps each run's view until the run's summary changes. A view folds what the
log holds at the time of the read, which is at least what the summary it was read for covers.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from resultlog.consumers._samples import RunSamples
from resultlog.consumers.resume import RunRecords
from resultlog.schemas import RunKey, RunSummary

__all__ = ["SampleCache"]

_CACHED_RUNS = 256
_MIN_REREAD_S = 0.5  # a run that keeps changing is read at most this often


@dataclass
class _Entry:
    fingerprint: str
    read_at: float
    view: RunSamples


class SampleCache:
    """Each run's view, kept until its summary changes and read again at most every 0.5 s."""

    def __init__(self, read: Callable[[RunKey, threading.Event | None], RunRecords]) -> None:
        self._read = read
        self._entries: OrderedDict[RunKey, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self._reading: dict[RunKey, threading.Lock] = {}

    def cached(self, summary: RunSummary) -> RunSamples | None:
        """The run's view if one is kept for this very summary, without reading."""
        with self._lock:
            entry = self._entries.get(summary.run_key)
        return entry.view if entry is not None and entry.fingerprint == _print(summary) else None

    def view(self, summary: RunSummary, stop: threading.Event | None = None) -> RunSamples:
        """The run's view for `summary`: kept, or read now (one read per run at a time;
        given up once `stop` is set)."""
        run_key = summary.run_key
        with self._lock:
            reading = self._reading.setdefault(run_key, threading.Lock())
        with reading:
            entry = self._entries.get(run_key)
            fingerprint = _print(summary)
            now = time.monotonic()
            if entry is not None and (
                entry.fingerprint == fingerprint or now - entry.read_at < _MIN_REREAD_S
            ):
                return entry.view
            view = RunSamples.of(run_key, self._read(run_key, stop))
            with self._lock:
                self._entries[run_key] = _Entry(fingerprint, now, view)
                self._entries.move_to_end(run_key)
                while len(self._entries) > _CACHED_RUNS:
                    old, _ = self._entries.popitem(last=False)
                    self._reading.pop(old, None)
            return view


def _print(summary: RunSummary) -> str:
    """What identifies a summary's content (its freshness block aside)."""
    return summary.model_copy(update={"as_of": None}).model_dump_json()
