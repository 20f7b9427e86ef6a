"""The peer of `peer_quix.py`: a Quix Streams application folding the results topic per run.

Runs with the Python of the peer's own virtualenv (quixstreams, fastavro), never ours: it
imports nothing of resultlog. It reads the topic from the beginning with a fresh consumer
group until it has processed `--count` records and keeps, per run key, the latest record of
each (sample, epoch) and the run's fold: counts per score value, per sample the mean over its
non-S epochs (`score.numeric` when set, else C=1, I=0), accuracy = mean of the per-sample
values, exact (`Fraction`) and rounded once. Two forms: `--form rocksdb` keeps them in Quix
state (RocksDB, JSON values), `--form dict` in a plain dict of this process, folded by
`sdf.update` with no state store (the fastest honest form). Every record of the benchmark
lies inside its run's shape, so design rule 8 never applies. Prints one JSON line.

    python _quix_app.py --bootstrap HOST:PORT --topic T --schema S.avsc --count N \
        --state-dir D [--form rocksdb|dict]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
import uuid
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

from fastavro import parse_schema, schemaless_reader
from fastavro.schema import fingerprint, to_parsing_canonical_form

# quixstreams is installed only in the peer's virtualenv (it pins another confluent-kafka than
# ours), so mypy, run from ours, cannot see it: its classes are Any here.
from quixstreams import Application  # type: ignore[import-not-found]
from quixstreams.models import Deserializer  # type: ignore[import-not-found]

Fold = dict[str, Any]  # one run's fold as Quix state holds it (JSON: fractions as "n/d")
Epochs = dict[str, list[Any]]  # a sample's latest records: epoch -> [score value, numeric]

_MAGIC = b"\xc3\x01"
_HEADER = 10  # magic and the 8-byte CRC-64-AVRO fingerprint

# The benchmark's topic is written fast and read once: the consumer settings of our reader.
_FETCH = {
    "fetch.wait.max.ms": 50,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
}


class SingleObjectAvro(Deserializer):  # type: ignore[misc]  # Deserializer is Any to mypy
    """Avro single-object encoding (C3 01, fingerprint, body) decoded with the writer schema."""

    def __init__(self, schema_path: Path) -> None:
        super().__init__()
        definition = json.loads(schema_path.read_text())
        self.name = definition["name"]
        self.schema = parse_schema(definition)
        canonical = to_parsing_canonical_form(definition)
        self.prefix = _MAGIC + bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))
        self.first_at: float | None = None

    def __call__(self, value: bytes, ctx: Any) -> Any:
        if self.first_at is None:
            self.first_at = time.perf_counter()
        if value[:_HEADER] != self.prefix:
            raise ValueError(f"not {self.name} in single-object encoding")
        return schemaless_reader(io.BytesIO(value[_HEADER:]), self.schema, None)


class RunKeyOf(Deserializer):  # type: ignore[misc]  # Deserializer is Any to mypy
    """The run key (`run_id/benchmark_id/model`, encoded) of a `.../sample_index/epoch` key.

    Quix keys state by the message key; every record of a run key lies in one partition, so
    keying by the run key needs no repartition topic.
    """

    def __call__(self, value: bytes, ctx: Any) -> str:
        return value.rsplit(b"/", 2)[0].decode("ascii")


def epoch_points(record: list[Any]) -> Fraction | None:
    """An epoch's value: numeric when set, else C=1, I=0; None for S."""
    value, numeric = record
    if value == "S":
        return None
    if numeric is not None:
        return Fraction(numeric)
    return Fraction(1 if value == "C" else 0)


def share(epochs: Epochs) -> tuple[int, Fraction] | None:
    """A sample's (non-S epochs, sum of their values); None when all its epochs are S."""
    points = [p for p in map(epoch_points, epochs.values()) if p is not None]
    return (len(points), sum(points, Fraction(0))) if points else None


def count_sample(fold: Fold, epochs: Epochs, sign: int) -> None:
    """Add (1) or take away (-1) one sample and its epochs from the run's fold."""
    if not epochs:
        return
    for value, _numeric in epochs.values():
        fold["counts"][value] += sign
    kept = share(epochs)
    if kept is None:
        fold["skipped"] += sign
        return
    fold["answered"] += sign
    sums = fold["sums"]
    slot = str(kept[0])
    sums[slot] = str(Fraction(sums.get(slot, "0")) + sign * kept[1])


def fold_record(record: dict[str, Any], state: Any) -> Fold:
    """Replace the record's (sample, epoch) in its run's state and return the run's fold."""
    fold: Fold = state.get("fold") or {
        "counts": {"C": 0, "I": 0, "S": 0},
        "answered": 0,
        "skipped": 0,
        "sums": {},  # non-S epochs of a sample -> sum of those samples' values
    }
    sample_key = f"s/{record['sample_id']}"
    epochs: Epochs = state.get(sample_key) or {}
    count_sample(fold, epochs, -1)
    score = record["score"]
    epochs[str(record["epoch"])] = [score["value"], score.get("numeric")]
    count_sample(fold, epochs, 1)
    state.set(sample_key, epochs)
    state.set("fold", fold)
    return fold


def points(value: str, numeric: float | None) -> int | Fraction | None:
    """An epoch's value as `epoch_points` says, an int unless numeric (int sums stay fast)."""
    if value == "S":
        return None
    if numeric is not None:
        return Fraction(numeric)
    return 1 if value == "C" else 0


class PlainFold:
    """One run's latest record per (sample, epoch) and its fold, as plain Python objects."""

    def __init__(self) -> None:
        self.samples: dict[str, dict[int, tuple[str, int | Fraction | None]]] = {}
        self.counts = {"C": 0, "I": 0, "S": 0}
        self.answered = 0
        self.skipped = 0
        self.sums: dict[int, int | Fraction] = {}  # non-S epochs of a sample -> sum of values

    def apply(self, record: dict[str, Any]) -> None:
        """Replace the record's (sample, epoch) and refold its sample."""
        epochs = self.samples.get(record["sample_id"])
        if epochs is None:
            epochs = self.samples[record["sample_id"]] = {}
        else:
            self._count(epochs, -1)
        score = record["score"]
        value = score["value"]
        epochs[record["epoch"]] = (value, points(value, score.get("numeric")))
        self._count(epochs, 1)

    def _count(self, epochs: dict[int, tuple[str, int | Fraction | None]], sign: int) -> None:
        """Add (1) or take away (-1) one sample and its epochs."""
        kept = 0
        total: int | Fraction = 0
        for value, epoch_value in epochs.values():
            self.counts[value] += sign
            if epoch_value is not None:
                kept += 1
                total += epoch_value
        if not kept:
            self.skipped += sign
            return
        self.answered += sign
        self.sums[kept] = self.sums.get(kept, 0) + sign * total

    def summary(self) -> dict[str, Any]:
        """Accuracy (as `accuracy`), counts and skipped samples, as the report holds them."""
        total = sum((Fraction(s) / kept for kept, s in self.sums.items()), Fraction(0))
        accuracy = float(total / self.answered) if self.answered else 0.0
        return {"accuracy": accuracy, **self.counts, "skipped": self.skipped}


def accuracy(fold: Fold) -> float:
    """Mean of the per-sample values, rounded once (0.0 without answered samples)."""
    if not fold["answered"]:
        return 0.0
    total = sum((Fraction(s) / int(kept) for kept, s in fold["sums"].items()), Fraction(0))
    return float(total / fold["answered"])


Summaries = Callable[[], tuple[int, dict[str, dict[str, Any]]]]


def in_rocksdb(sdf: Any) -> Summaries:
    """Fold in Quix state per run key; the records seen and each run's summary, once run."""
    folds: dict[str, Fold] = {}
    processed = 0

    def keep(fold: Fold, key: str, _timestamp: int, _headers: Any) -> None:
        nonlocal processed
        folds[key] = fold
        processed += 1

    sdf.apply(fold_record, stateful=True).update(keep, metadata=True)
    return lambda: (
        processed,
        {
            key: {"accuracy": accuracy(fold), **fold["counts"], "skipped": fold["skipped"]}
            for key, fold in sorted(folds.items())
        },
    )


def in_a_dict(sdf: Any) -> Summaries:
    """Fold into a plain dict of run key -> PlainFold; the same two figures, once run."""
    folds: dict[str, PlainFold] = {}
    processed = 0

    def fold(record: dict[str, Any], key: str, _timestamp: int, _headers: Any) -> None:
        nonlocal processed
        run = folds.get(key)
        if run is None:
            run = folds[key] = PlainFold()
        run.apply(record)
        processed += 1

    sdf.update(fold, metadata=True)
    return lambda: (processed, {key: run.summary() for key, run in sorted(folds.items())})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--schema", type=Path, required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    parser.add_argument("--form", choices=("rocksdb", "dict"), default="rocksdb")
    args = parser.parse_args()

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=f"peer-quix-{uuid.uuid4().hex}",
        auto_offset_reset="earliest",
        state_dir=args.state_dir,
        use_changelog_topics=False,  # our replay writes nothing either
        consumer_extra_config=_FETCH,
        loglevel="WARNING",
    )
    values = SingleObjectAvro(args.schema)
    topic = app.topic(args.topic, key_deserializer=RunKeyOf(), value_deserializer=values)
    sdf = app.dataframe(topic)
    summaries = in_rocksdb(sdf) if args.form == "rocksdb" else in_a_dict(sdf)
    started, cpu = time.perf_counter(), time.process_time()
    # count: stop after this many outputs (one per record); timeout: give up when idle.
    app.run(count=args.count, timeout=60.0, collect=False)
    processed, runs = summaries()
    seconds, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    first = (values.first_at or started) - started
    report = {
        "records": processed,
        "seconds": seconds,
        "cpu_s": cpu_s,
        "first_record_s": first,
        "runs": runs,
    }
    print(json.dumps(report))
    return 0 if processed == args.count else 1


if __name__ == "__main__":
    sys.exit(main())
