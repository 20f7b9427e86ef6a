"""Per-sample views of a run and of two runs side by side, folded from a run's latest records.

The fold keeps totals, not per-sample values; these views take the records the resume reader
found for a run key and give per-sample values, per-epoch accuracy with intervals, and a
paired comparison with McNemar's test. The runs page and `resultlog.analysis` both use them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction
from typing import Any

from resultlog.consumers._stats import (
    Estimate,
    Flip,
    PairedSample,
    mcnemar_p,
    paired,
    proportion,
)
from resultlog.consumers.fold import RunFold, Shape
from resultlog.consumers.resume import RunRecords
from resultlog.schemas import RunKey, SampleResult, ScoreValue

__all__ = ["Cell", "Comparison", "RunSamples"]


@dataclass(frozen=True, slots=True)
class Cell:
    """The latest record of one (sample, epoch), as the views need it."""

    sample_index: int
    sample_id: str
    epoch: int
    value: ScoreValue
    numeric: float | None
    degraded: bool
    error_kind: str | None
    http_status: int | None
    error_message: str | None
    created_at: datetime
    in_shape: bool

    @classmethod
    def of(cls, record: SampleResult, shape: Shape) -> Cell:
        """The cell of one record, inside the run's shape or not."""
        error = record.error
        return cls(
            sample_index=record.sample_index,
            sample_id=record.sample_id,
            epoch=record.epoch,
            value=record.score.value,
            numeric=record.score.numeric,
            degraded=record.degraded,
            error_kind=error.kind if error is not None else None,
            http_status=error.http_status if error is not None else None,
            error_message=error.message if error is not None else None,
            created_at=record.created_at,
            in_shape=shape.holds(record.sample_index, record.epoch),
        )

    @property
    def points(self) -> Fraction | None:
        """The epoch's value as the fold takes it: numeric, else C=1 and I=0; None for S."""
        if self.value is ScoreValue.S:
            return None
        if self.numeric is not None:
            return Fraction(self.numeric)
        return Fraction(1 if self.value is ScoreValue.C else 0)

    def as_json(self) -> dict[str, Any]:
        """One entry of the samples route's `records`."""
        return {
            "sample_index": self.sample_index,
            "sample_id": self.sample_id,
            "epoch": self.epoch,
            "value": self.value.value,
            "numeric": self.numeric,
            "degraded": self.degraded,
            "error_kind": self.error_kind,
            "http_status": self.http_status,
            "error_message": self.error_message,
            "created_at": self.created_at.isoformat(),
            "in_shape": self.in_shape,
        }


@dataclass(frozen=True)
class RunSamples:
    """A run's latest records as cells, its shape and the per-sample values the fold uses."""

    run_key: RunKey
    shape: Shape | None
    cells: list[Cell]  # by (sample_index, epoch)
    values: dict[str, Fraction]  # sample_id -> mean of its non-S epochs, samples in order
    skipped: list[str]  # samples in the shape whose every epoch is S
    undecodable: int

    @classmethod
    def of(cls, run_key: RunKey, loaded: RunRecords) -> RunSamples:
        """The view of the records the resume reader found for `run_key`."""
        folded = RunFold(run_key)
        for record in loaded.records:
            folded.offer(record)
        shape = folded.shape
        cells = sorted(
            (Cell.of(r, shape) for r in loaded.records if shape is not None),
            key=lambda c: (c.sample_index, c.epoch),
        )
        epochs: dict[str, list[Fraction | None]] = {}
        for cell in cells:
            if cell.in_shape:
                epochs.setdefault(cell.sample_id, []).append(cell.points)
        values: dict[str, Fraction] = {}
        skipped: list[str] = []
        for sample_id, points in epochs.items():
            kept = [p for p in points if p is not None]
            if kept:
                values[sample_id] = sum(kept, Fraction(0)) / len(kept)
            else:
                skipped.append(sample_id)
        return cls(run_key, shape, cells, values, skipped, loaded.undecodable)

    def sample_count(self) -> int:
        """How many samples the shape holds (those seen when its dataset size is unknown)."""
        if self.shape is not None and self.shape.dataset_size is not None:
            return self.shape.dataset_size
        return len({cell.sample_index for cell in self.cells if cell.in_shape})

    def sample_rows(self, limit: int) -> list[tuple[int, str]]:
        """The shape's first `limit` samples: index and id (`#index` before its first record)."""
        ids = {cell.sample_index: cell.sample_id for cell in self.cells if cell.in_shape}
        size = self.shape.dataset_size if self.shape is not None else None
        indexes = range(min(size, limit)) if size is not None else sorted(ids)[:limit]
        return [(index, ids.get(index, f"#{index}")) for index in indexes]

    def accuracy(self) -> Estimate:
        """The mean of the per-sample values (the summary's accuracy) and its 95% interval."""
        return proportion(self.values.values())

    def epoch_accuracy(self) -> list[tuple[int, Estimate, int]]:
        """Per epoch of the shape: the mean of its non-S values with its interval, and its S."""
        if self.shape is None:
            return []
        values: list[list[Fraction]] = [[] for _ in range(self.shape.epochs)]
        skipped = [0] * self.shape.epochs
        for cell in self.cells:
            if not cell.in_shape:
                continue
            points = cell.points
            if points is None:
                skipped[cell.epoch] += 1
            else:
                values[cell.epoch].append(points)
        return [(e, proportion(v), skipped[e]) for e, v in enumerate(values)]

    def degraded(self) -> list[Cell]:
        """The degraded records inside the shape."""
        return [cell for cell in self.cells if cell.in_shape and cell.degraded]

    def error_kinds(self) -> dict[str, int]:
        """How many degraded records of the shape have each error kind."""
        kinds = Counter(cell.error_kind or "unknown" for cell in self.degraded())
        return dict(sorted(kinds.items()))

    def progress(self) -> list[datetime]:
        """When each record of the shape was written, oldest first."""
        return sorted(cell.created_at for cell in self.cells if cell.in_shape)

    def as_json(self) -> dict[str, Any]:
        """The body of `GET /runs/{run_id}/{benchmark}/{model}/samples`."""
        shape = self.shape
        return {
            "run_id": self.run_key.run_id,
            "benchmark_id": self.run_key.benchmark_id,
            "model": self.run_key.model,
            "shape": None
            if shape is None
            else {"epochs": shape.epochs, "dataset_size": shape.dataset_size},
            "accuracy": self.accuracy().as_json(),
            "epochs": [
                {"epoch": epoch, "accuracy": found.as_json(), "skipped": skipped}
                for epoch, found, skipped in self.epoch_accuracy()
            ],
            "samples": [
                {"sample_id": sample_id, "value": float(value)}
                for sample_id, value in self.values.items()
            ],
            "skipped_samples": self.skipped,
            "error_kinds": self.error_kinds(),
            "undecodable": self.undecodable,
            "records": [cell.as_json() for cell in self.cells],
        }


@dataclass(frozen=True)
class Comparison:
    """Run b against run a of one benchmark, over the samples both answered."""

    a: RunSamples
    b: RunSamples
    shared: list[PairedSample]  # in a's sample order
    difference: Estimate  # the mean of b - a over the shared samples, paired interval

    @classmethod
    def of(cls, a: RunSamples, b: RunSamples) -> Comparison:
        """The comparison of b against a."""
        epochs = max(run.shape.epochs if run.shape is not None else 1 for run in (a, b))
        shared, difference = paired(a.values, b.values, epochs=epochs)
        return cls(a, b, shared, difference)

    def over_shared(self, run: RunSamples) -> Estimate:
        """One run's accuracy over the shared samples, with its own interval."""
        return proportion(run.values[sample.sample_id] for sample in self.shared)

    def flips(self) -> dict[str, list[str]]:
        """The shared samples correct in a and not in b (c_to_i), and the other way (i_to_c)."""
        found: dict[str, list[str]] = {Flip.C_TO_I: [], Flip.I_TO_C: []}
        for sample in self.shared:
            if sample.flip is not None:
                found[sample.flip].append(sample.sample_id)
        return found

    def mcnemar_p(self) -> float:
        """McNemar's exact two-sided p-value of the flips (1.0 without any)."""
        flips = self.flips()
        return mcnemar_p(len(flips[Flip.C_TO_I]), len(flips[Flip.I_TO_C]))

    def as_json(self) -> dict[str, Any]:
        """The body of `GET /compare?a=...&b=...`."""

        def side(run: RunSamples) -> dict[str, Any]:
            return {
                "run_id": run.run_key.run_id,
                "benchmark_id": run.run_key.benchmark_id,
                "model": run.run_key.model,
                "accuracy": run.accuracy().as_json(),
                "shared_accuracy": self.over_shared(run).as_json(),
                "only_here": len(run.values) - len(self.shared),
            }

        return {
            "benchmark_id": self.a.run_key.benchmark_id,
            "a": side(self.a),
            "b": side(self.b),
            "shared": len(self.shared),
            "difference": self.difference.as_json(),
            "flips": self.flips(),
            "mcnemar_p": self.mcnemar_p(),
            "samples": [
                {
                    "sample_id": s.sample_id,
                    "a": float(s.a),
                    "b": float(s.b),
                    "difference": float(s.difference),
                    "flip": s.flip,
                }
                for s in self.shared
            ],
        }
