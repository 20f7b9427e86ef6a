"""A peer side by side: our replay and a Quix Streams application fold the same topic.

Fills one results topic with realistic records (runs of 1000 samples x 2 epochs, C, I and
degraded S scores, some numeric, every tenth sample's epoch 0 written twice so the latest
record of a key wins), then folds it three times in one run: `replay_all`, and a Quix Streams
application (`benchmarks/_quix_app.py`) in both its forms, its state in RocksDB per run key
and (stateless, the fastest honest form) in a plain dict folded by `sdf.update`. The app runs
with the Python of its own virtualenv, because quixstreams pins another confluent-kafka than
ours. That venv is made once in
`${XDG_CACHE_HOME:-~/.cache}/resultlog/bench/quix-venv` (pip's cache makes it quick) and
reused while its pins hold. Uses RESULTLOG_BOOTSTRAP_SERVERS, or starts a local broker.

Each side is timed the same way, inside the process that reads: from just before the call
that starts reading (`replay_all`, `Application.run`) until the per-run results are in hand;
neither figure holds an interpreter start, imports or the venv. CPU s is the reading
process's CPU time over the same span (every thread, librdkafka's too; not the broker's): a
steadier figure than wall time on a shared machine. Both forms must find every run's
accuracy and counts as ours. Goal: ours at least 2x each form's records/s.

    .venv/bin/python -m benchmarks.peer_quix [--records 100000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from benchmarks._kafka import ClientConfig, bootstrap_servers, connection, produce, record
from benchmarks._results import Goal, Result, add_results_argument, report
from resultlog.consumers import ReplayResult, replay_all
from resultlog.schemas import (
    Codec,
    RecordError,
    RecordStatus,
    RunKey,
    SampleResult,
    Score,
    ScoreValue,
    encode_key,
    encode_run_key,
    partition_for,
    shipped_catalog,
)

QUIXSTREAMS = "3.28.1"  # the version measured; the peer's fastavro is the same as ours
PARTITIONS = 6
SAMPLES_PER_RUN = 1000
EPOCHS = 2
REWRITTEN_EVERY = 10  # every tenth sample's epoch 0 is written a second time, differently
_NUMERIC = (0.1, 0.3, 0.7, 0.95)  # not dyadic: an inexact sum would show
_PEER_APP = Path(__file__).with_name("_quix_app.py")
# The peer's two forms (`_quix_app.py --form`): its state in RocksDB, or in a plain dict.
FORMS = {"rocksdb": "RocksDB state", "dict": "plain dict"}
_STARTS = {"rocksdb": "group join, state store", "dict": "group join"}


def peer_python() -> Path:
    """The peer venv's Python, made (or remade when its pins changed) on first use."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    venv = cache / "resultlog" / "bench" / "quix-venv"
    pins = [f"quixstreams=={QUIXSTREAMS}", f"fastavro=={version('fastavro')}"]
    marker = venv / "resultlog-pins.txt"  # what it was made with, our Python's version too
    made_with = " ".join([*pins, f"python{sys.version_info.major}.{sys.version_info.minor}"])
    python = venv / "bin" / "python"
    if marker.exists() and marker.read_text() == made_with and python.exists():
        return python
    print(f"making the peer venv {venv} ({' '.join(pins)}) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *pins], check=True)
    marker.write_text(made_with)
    return python


def planned() -> Iterator[tuple[int, int, int, bool]]:
    """(run, sample_index, epoch, rewritten) in write order: each run whole, then rewrites."""
    for run in itertools.count():
        for index in range(SAMPLES_PER_RUN):
            for epoch in range(EPOCHS):
                yield run, index, epoch, False
        for index in range(0, SAMPLES_PER_RUN, REWRITTEN_EVERY):
            yield run, index, 0, True


def varied(base: SampleResult, draw: int) -> SampleResult:
    """`base` scored by `draw` (0-99): 10% S (degraded), 30% I, 60% C, one in five numeric."""
    if draw < 10:
        error = RecordError(kind="model_error", message="429 Too Many Requests", http_status=429)
        update: dict[str, Any] = {"status": RecordStatus.DEGRADED, "error": error, "usage": None}
        return base.model_copy(update={**update, "score": Score(value=ScoreValue.S)})
    value = ScoreValue.I if draw < 40 else ScoreValue.C
    numeric = _NUMERIC[draw % 4] if draw % 5 == 0 else None
    score = base.score.model_copy(update={"value": value, "numeric": numeric})
    return base.model_copy(update={"score": score})


def fill(config: ClientConfig, topic: str, records: int) -> tuple[float, int]:
    """Write `records` records as `planned`; return seconds and the values' bytes."""
    codec = Codec()
    producer = Producer({**config, "linger.ms": 20, "compression.type": "zstd"})
    started, value_bytes = time.perf_counter(), 0
    for run, index, epoch, rewritten in itertools.islice(planned(), records):
        run_key = RunKey(f"peer-bench-{run:04d}", "arith", "openai/gpt-4o")
        draw = (run * 7919 + index * 104729 + epoch * 1299709 + rewritten * 15485863) % 100
        sample = varied(record(run_key, index, epoch, EPOCHS, SAMPLES_PER_RUN), draw)
        value = codec.encode_sample_result(sample)
        value_bytes += len(value)
        key = encode_key(run_key, index, epoch)
        produce(producer, topic, key, value, partition_for(run_key, PARTITIONS))
    producer.flush(300)
    return time.perf_counter() - started, value_bytes


def records_on(config: ClientConfig, topic: str) -> int:
    """How many records the topic holds now: its high watermarks less its low ones."""
    consumer = Consumer({**config, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        marks = [
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            for p in range(PARTITIONS)
        ]
    finally:
        consumer.close()
    return sum(high - low for low, high in marks)


def run_peer(
    python: Path, bootstrap: str, topic: str, count: int, work: Path, *, form: str
) -> dict[str, Any]:
    """Run the Quix Streams app in one of its FORMS to the end of the topic; its JSON report."""
    schema = work / "sample_result.avsc"
    schema.write_text(shipped_catalog().current("resultlog.SampleResult").text)
    command = [
        str(python),
        "-I",  # nothing of ours on its path, nor PYTHON* variables
        str(_PEER_APP),
        *("--bootstrap", bootstrap, "--topic", topic, "--schema", str(schema)),
        *("--count", str(count), "--state-dir", str(work / f"state-{form}"), "--form", form),
    ]
    # Its stderr (its dependencies' deprecation warnings) is shown only if it fails.
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"the Quix Streams app failed (exit {done.returncode})")
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return report


def differences(ours: ReplayResult, peer: dict[str, Any]) -> list[str]:
    """Runs whose accuracy (same float) or counts differ between the two folds."""
    theirs: dict[str, dict[str, Any]] = peer["runs"]
    found = []
    for run_key, summary in ours.summaries.items():
        name = encode_run_key(run_key).decode()
        got = theirs.pop(name, None)
        if got is None:
            found.append(f"{name}: missing from the peer")
            continue
        ours_row = (summary.accuracy, summary.records, summary.skipped_questions)
        peer_row = (got["accuracy"], got["C"] + got["I"] + got["S"], got["skipped"])
        if ours_row != peer_row:
            found.append(f"{name}: ours {ours_row} peer {peer_row} (accuracy, records, skipped)")
    found.extend(f"{name}: only the peer has it" for name in theirs)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    add_results_argument(parser)
    args = parser.parse_args()
    python = peer_python()
    with bootstrap_servers() as bootstrap, tempfile.TemporaryDirectory() as work:
        return run(python, bootstrap, args.records, Path(work), args.results)


def run(python: Path, bootstrap: str, records: int, work: Path, results: Path | None) -> int:
    config: ClientConfig = {"bootstrap.servers": bootstrap}
    topic = f"bench-peer-{uuid.uuid4().hex[:8]}"
    new = NewTopic(topic, PARTITIONS, 1, config={"cleanup.policy": "compact"})
    admin = AdminClient(config)  # held: a collected client cancels what it was asked
    admin.create_topics([new])[topic].result(30)
    print(f"writing {records} records ...", flush=True)
    seconds, value_bytes = fill(config, topic, records)
    print(f"  written in {seconds:.0f}s, {value_bytes / records:.0f} bytes a value on average")
    total = records_on(config, topic)
    assert total == records, (total, records)

    started, cpu = time.perf_counter(), time.process_time()
    ours = replay_all(connection(bootstrap, topic, PARTITIONS))
    ours_s, ours_cpu_s = time.perf_counter() - started, time.process_time() - cpu
    mine = Timed("resultlog replay_all", total, ours_s, ours_cpu_s)
    assert ours.records == total, (ours.records, total)
    peers = {form: run_peer(python, bootstrap, topic, total, work, form=form) for form in FORMS}

    print(f"{'':34}{'records':>10}{'seconds':>10}{'records/s':>12}{'CPU s':>8}")
    print(mine.row())
    for form, peer in peers.items():
        print(Timed.of_peer(peer, form).row())
    differing = [form for form, peer in peers.items() if _compare(ours, mine, peer, form, results)]
    return 1 if differing else 0


@dataclass(frozen=True)
class Timed:
    """One side's fold: records, wall seconds, and CPU seconds of the process that read."""

    name: str
    records: int
    seconds: float
    cpu_s: float

    @classmethod
    def of_peer(cls, peer: dict[str, Any], form: str) -> Timed:
        """The side of one form of the peer, from its report."""
        name = f"Quix Streams {QUIXSTREAMS}, {FORMS[form]}"
        return cls(name, peer["records"], peer["seconds"], peer["cpu_s"])

    @property
    def rate(self) -> float:
        """Records per second."""
        return self.records / self.seconds

    def row(self) -> str:
        """The side as one row of the printed table."""
        figures = f"{self.records:>10}{self.seconds:>10.1f}{self.rate:>12.0f}{self.cpu_s:>8.1f}"
        return f"{self.name:34}{figures}"


def _compare(
    ours: ReplayResult, mine: Timed, peer: dict[str, Any], form: str, results: Path | None
) -> bool:
    """Report ours against one form of the peer; whether their accuracies differ."""
    theirs = Timed.of_peer(peer, form)
    print(
        f"ours / {theirs.name}: {mine.rate / theirs.rate:.2f}x (goal >= 2x; CPU time "
        f"{theirs.cpu_s / mine.cpu_s:.2f}x); its first record came "
        f"{peer['first_record_s']:.1f}s after its start ({_STARTS[form]})"
    )
    found = differences(ours, peer)
    result = Result(
        f"fold of {ours.records // 1000}k records vs Quix Streams, {FORMS[form]}",
        mine.rate,
        "rec/s",
        baseline=theirs.rate,
        baseline_what=theirs.name,
        goal=Goal(">=", 2.0, on="ratio"),
        note="identical accuracy per run" if not found else "ACCURACY DIFFERS",
    )
    report(result, results)
    print(f"identical accuracy per run: {'no' if found else 'yes'} ({len(ours.summaries)} runs)")
    for line in found:
        print(f"  {line}")
    return bool(found)


if __name__ == "__main__":
    sys.exit(main())
