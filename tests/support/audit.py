"""What a fault trial left in the log, and the fault table's rows."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from resultlog.consumers import read_run_records
from resultlog.kafka import KafkaConnection
from resultlog.schemas import RunKey
from resultlog.settings import Settings
from tests.support.kafka import raw_run_records


@dataclass(frozen=True)
class Audit:
    """Latest-record and raw-record counts of a run against the pairs it must hold."""

    lost: int  # expected pairs without a latest record
    extra: int  # latest records of pairs not expected
    duplicates: int  # raw records byte-identical to an earlier one of the same key
    raw: int  # raw records of the run
    latest: int  # latest records of the run

    @property
    def clean(self) -> bool:
        """No record lost, none unexpected, none written twice."""
        return self.lost == self.extra == self.duplicates == 0


def audit(settings: Settings, run_key: RunKey, pairs: set[tuple[int, int]]) -> Audit:
    """Compare the run's latest records (exactly one per pair) and raw records with `pairs`."""
    with KafkaConnection(settings) as kafka:
        records, undecodable, *_ = read_run_records(kafka, run_key)
    assert undecodable == 0
    latest = Counter((r.sample_index, r.epoch) for r in records)
    assert all(n == 1 for n in latest.values())
    raw = raw_run_records(settings, run_key)
    copies = Counter((r.key, r.value) for r in raw)
    return Audit(
        lost=len(pairs - set(latest)),
        extra=len(set(latest) - pairs),
        duplicates=sum(n - 1 for n in copies.values()),
        raw=len(raw),
        latest=len(records),
    )


def all_pairs(samples: int, epochs: int) -> set[tuple[int, int]]:
    """Every (sample_index, epoch) of a run."""
    return {(i, e) for i in range(samples) for e in range(epochs)}


def report(table: str, **figures: object) -> None:
    """Print one row of the fault table (visible with -s or in the captured output)."""
    cells = " ".join(f"{name}={value}" for name, value in figures.items())
    print(f"FAULT-TABLE {table}: {cells}")
