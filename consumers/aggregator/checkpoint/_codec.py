"""The aggregator's checkpoint records: exact fold contributions in columns, Avro-framed.

A generation of a partition's checkpoint is some pieces (each well under Kafka's default
1 MB message size) and a header written once they are all acknowledged. Keys:
`<results topic>/<partition>/header` (compaction keeps the newest header) and
`<results topic>/<partition>/<generation>/<writer>/<index>` for pieces. Values are Avro
single-object encoded (`C3 01`, fingerprint, body) under `aggregator_checkpoint.v2.avsc`
(v1 named no cluster or topic ID: its records are refused as OldCheckpointError).
Every Contribution field is written and read by name, column by column: doubles as IEEE
bytes, so a restored fold holds the same bits as the one that was written.
"""

from __future__ import annotations

import io
import re
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro

from resultlog.consumers._contribution import of_columns
from resultlog.consumers.errors import ConsumerError
from resultlog.consumers.fold import Contribution, Shape
from resultlog.schemas import RunKey, ScoreValue, shipped_catalog

__all__ = [
    "FORMAT_VERSION",
    "MAX_GENERATION",
    "CheckpointError",
    "CheckpointId",
    "Header",
    "OldCheckpointError",
    "Piece",
    "RunRows",
    "decode",
    "encode_header",
    "header_key",
    "iter_pieces",
    "parse_piece_key",
    "piece_key",
    "restore_rows",
]

FORMAT_VERSION = 1
# Generations beyond this are garbage, never numbered after: a writer adds one to the highest
# it saw, and an Avro long must hold the result.
MAX_GENERATION = 10**15
_NUMBER = re.compile(r"[0-9]{1,16}")
_SCHEMA = shipped_catalog().current("resultlog.AggregatorCheckpoint")
_PREFIX = b"\xc3\x01" + _SCHEMA.fingerprint
# Every version since v2 names its exact log, so is read (resolved into the current one).
_READERS = {
    b"\xc3\x01" + old.fingerprint: (old.parsed, None if old is _SCHEMA else _SCHEMA.parsed)
    for old in shipped_catalog().versions("resultlog.AggregatorCheckpoint")
    if old.version >= 2
}
_OLD_PREFIXES = tuple(
    b"\xc3\x01" + old.fingerprint
    for old in shipped_catalog().versions("resultlog.AggregatorCheckpoint")
    if old.version < 2
)
_HEADER = "resultlog.CheckpointHeader"
_PIECE = "resultlog.CheckpointPiece"
_ROWS_PER_PIECE = 4096  # about 0.5 MB with short sample ids and one metric
_MAX_PIECE_BYTES = 900_000  # under message.max.bytes (1,000,000) of producers and brokers
_SWAP = sys.byteorder != "little"

RunRows = tuple[RunKey, list[Contribution]]


class CheckpointError(ConsumerError, ValueError):
    """A checkpoint record that cannot be decoded or does not hold together."""


class OldCheckpointError(CheckpointError):
    """A checkpoint record of an older schema version, which does not name its exact log."""


@dataclass(frozen=True)
class CheckpointId:
    """One generation of one partition's checkpoint, by one writer."""

    results_topic: str
    partition: int
    partitions: int
    generation: int
    writer: str
    next_offset: int
    cluster_id: str = ""  # the exact log: cluster and topic ID ("" unknown: never restored)
    topic_id: str = ""


@dataclass(frozen=True)
class Header:
    """A complete generation: how many pieces and when it was written."""

    id: CheckpointId
    pieces: int
    written_at_ms: int
    runs: int
    contributions: int


@dataclass(frozen=True)
class Piece:
    """Some runs' contributions of one generation (a run may span pieces)."""

    id: CheckpointId
    index: int
    runs: list[RunRows]


def header_key(results_topic: str, partition: int) -> bytes:
    """The key of a partition's header: compaction keeps its newest."""
    return f"{results_topic}/{partition}/header".encode()


def piece_key(checkpoint: CheckpointId, index: int) -> bytes:
    """The key of one piece of a generation."""
    c = checkpoint
    return f"{c.results_topic}/{c.partition}/{c.generation}/{c.writer}/{index}".encode()


def parse_piece_key(key: bytes) -> tuple[str, int, int, str, int] | None:
    """(results topic, partition, generation, writer, index) of a piece key; None for any
    other key (ASCII digits only, generations at most MAX_GENERATION)."""
    parts = key.decode("utf-8", "replace").split("/")
    if len(parts) != 5:
        return None
    topic, partition, generation, writer, index = parts
    if not all(_NUMBER.fullmatch(part) for part in (partition, generation, index)):
        return None
    if int(generation) > MAX_GENERATION:
        return None
    return topic, int(partition), int(generation), writer, int(index)


def encode_header(header: Header) -> bytes:
    """The header record's value."""
    body = {
        "pieces": header.pieces,
        "written_at_ms": header.written_at_ms,
        "runs": header.runs,
        "contributions": header.contributions,
    }
    return _encode(header.id, (_HEADER, body))


def iter_pieces(checkpoint: CheckpointId, runs: Iterable[RunRows]) -> Iterator[bytes]:
    """The pieces' values, in index order, encoded as the runs are read."""
    for index, chunk in enumerate(_chunks(runs)):
        yield _encode(checkpoint, (_PIECE, _columns(index, chunk)))


def decode(value: bytes) -> Header | Piece:
    """A header or a piece; CheckpointError if the bytes are not one of ours that holds."""
    if value.startswith(_OLD_PREFIXES):
        raise OldCheckpointError("written by an older version, naming no cluster or topic ID")
    schemas = _READERS.get(value[: len(_PREFIX)])
    if schemas is None:
        raise CheckpointError("not an aggregator checkpoint of a known schema version")
    try:
        datum: Any = fastavro.schemaless_reader(
            io.BytesIO(value[len(_PREFIX) :]), *schemas, return_record_name=True
        )
        if datum["format_version"] != FORMAT_VERSION:
            raise CheckpointError(f"unknown format_version {datum['format_version']}")
        checkpoint = CheckpointId(
            datum["results_topic"],
            datum["partition"],
            datum["partitions"],
            datum["generation"],
            datum["writer"],
            datum["next_offset"],
            datum["cluster_id"],
            datum["topic_id"],
        )
        kind, body = datum["body"]
        if kind == _HEADER:
            return Header(
                checkpoint, body["pieces"], body["written_at_ms"], body["runs"],
                body["contributions"],
            )  # fmt: skip
        return Piece(checkpoint, body["index"], _rows(body))
    except CheckpointError:
        raise
    except Exception as exc:  # truncated bytes, bad columns, unknown symbols...
        raise CheckpointError(f"undecodable checkpoint record: {exc!r}") from exc


def restore_rows(pieces: Sequence[Piece]) -> dict[RunKey, list[Contribution]]:
    """Each run's contributions in a complete generation's pieces (in index order)."""
    rows: dict[RunKey, list[Contribution]] = {}
    for piece in pieces:
        for run_key, items in piece.runs:
            rows.setdefault(run_key, []).extend(items)
    return rows


def _encode(checkpoint: CheckpointId, body: tuple[str, dict[str, Any]]) -> bytes:
    datum = {
        "format_version": FORMAT_VERSION,
        "results_topic": checkpoint.results_topic,
        "partition": checkpoint.partition,
        "partitions": checkpoint.partitions,
        "generation": checkpoint.generation,
        "writer": checkpoint.writer,
        "next_offset": checkpoint.next_offset,
        "cluster_id": checkpoint.cluster_id,
        "topic_id": checkpoint.topic_id,
        "body": body,
    }
    out = io.BytesIO()
    out.write(_PREFIX)
    fastavro.schemaless_writer(out, _SCHEMA.parsed, datum)
    return out.getvalue()


def _chunks(runs: Iterable[RunRows]) -> Iterator[list[RunRows]]:
    """Runs cut into pieces of at most `_ROWS_PER_PIECE` contributions, halved while too big."""
    chunk: list[RunRows] = []
    size = 0
    for run_key, items in runs:
        start = 0
        while start < len(items) or (not items and start == 0):
            part = items[start : start + _ROWS_PER_PIECE - size]
            chunk.append((run_key, part))
            size += len(part)
            start += max(len(part), 1)
            if size >= _ROWS_PER_PIECE:
                yield from _fitting(chunk)
                chunk, size = [], 0
    if chunk:
        yield from _fitting(chunk)


def _fitting(chunk: list[RunRows]) -> Iterator[list[RunRows]]:
    """The chunk, or its halves, each encoding under `_MAX_PIECE_BYTES`."""
    rows = sum(len(items) for _, items in chunk)
    if rows <= 1 or _estimate(chunk) <= _MAX_PIECE_BYTES:
        yield chunk
        return
    half = rows // 2
    first: list[RunRows] = []
    second: list[RunRows] = []
    seen = 0
    for run_key, items in chunk:
        cut = max(0, min(len(items), half - seen))
        if cut or not items:
            first.append((run_key, items[:cut]))
        if cut < len(items):
            second.append((run_key, items[cut:]))
        seen += len(items)
    yield from _fitting(first)
    yield from _fitting(second)


def _estimate(chunk: list[RunRows]) -> int:
    """An upper bound of a chunk's encoded size."""
    total = 0
    for run_key, items in chunk:
        total += 64 + len(run_key.run_id) + len(run_key.benchmark_id) + len(run_key.model)
        for item in items:
            total += 140 + 3 * len(item.sample_id)
            total += sum(24 + 3 * len(name) for name, _ in item.metrics)
    return total


def _pack(code: str, values: list[Any]) -> bytes:
    packed = array(code, values)
    if _SWAP:
        packed.byteswap()
    return packed.tobytes()


def _unpack(code: str, raw: bytes, count: int | None = None) -> list[Any]:
    unpacked = array(code)
    unpacked.frombytes(raw)
    if _SWAP:
        unpacked.byteswap()
    if count is not None and len(unpacked) != count:
        raise CheckpointError(f"a column holds {len(unpacked)} values, expected {count}")
    return unpacked.tolist()


def _symbols(names: list[str]) -> tuple[list[str], list[int]]:
    table: dict[str, int] = {}
    indexes = [table.setdefault(name, len(table)) for name in names]
    return list(table), indexes


def _columns(index: int, chunk: list[RunRows]) -> dict[str, Any]:
    """One piece's body: every Contribution field as a column, by name."""
    rows = [item for _, items in chunk for item in items]
    values, value_index = _symbols([item.value.value for item in rows])
    names = [name for item in rows for name, _ in item.metrics]
    metric_symbols, metric_index = _symbols(names)
    return {
        "index": index,
        "runs": [
            {
                "run_id": run_key.run_id,
                "benchmark_id": run_key.benchmark_id,
                "model": run_key.model,
                "contributions": len(items),
            }
            for run_key, items in chunk
        ],
        "sample_id": [item.sample_id for item in rows],
        "sample_index": _pack("q", [item.sample_index for item in rows]),
        "epoch": _pack("q", [item.epoch for item in rows]),
        "value_symbols": values,
        "value": _pack("B", value_index),
        "numeric": _pack("d", [0.0 if item.numeric is None else item.numeric for item in rows]),
        "numeric_set": _pack("B", [item.numeric is not None for item in rows]),
        "degraded": _pack("B", [item.degraded for item in rows]),
        "metric_count": _pack("q", [len(item.metrics) for item in rows]),
        "metric_symbols": metric_symbols,
        "metric_name": _pack("q", metric_index),
        "metric_value": _pack("d", [value for item in rows for _, value in item.metrics]),
        "input_tokens": _pack("q", [item.tokens.input for item in rows]),
        "output_tokens": _pack("q", [item.tokens.output for item in rows]),
        "total_tokens": _pack("q", [item.tokens.total for item in rows]),
        "reasoning_tokens": _pack("q", [item.tokens.reasoning for item in rows]),
        "cost": _pack("d", [item.cost for item in rows]),
        "spent": _pack("d", [item.spent for item in rows]),
        "generation_time_ms": _pack("q", [item.generation_time_ms for item in rows]),
        "epochs": _pack("q", [item.shape.epochs for item in rows]),
        "dataset_size": _pack("q", [item.shape.dataset_size or 0 for item in rows]),
        "dataset_size_set": _pack("B", [item.shape.dataset_size is not None for item in rows]),
        "selected_samples": _pack("q", [item.shape.selected or 0 for item in rows]),
        "selected_samples_set": _pack("B", [item.shape.selected is not None for item in rows]),
        "created_at_ms": _pack("q", [item.created_at_ms for item in rows]),
    }


def _optional(values: list[Any], present: list[int]) -> list[Any]:
    return [value if is_set else None for value, is_set in zip(values, present, strict=True)]


def _rows(body: dict[str, Any]) -> list[RunRows]:
    """The runs' contributions of a piece's body, field by field."""
    n = len(body["sample_id"])
    if sum(run["contributions"] for run in body["runs"]) != n:
        raise CheckpointError("the runs' row counts do not add up to the piece's rows")
    col = {
        name: _unpack(code, body[name], n)
        for name, code in _ROW_COLUMNS.items()
    }  # fmt: skip
    metric_names = [body["metric_symbols"][i] for i in _unpack("q", body["metric_name"])]
    metric_values = _unpack("d", body["metric_value"], len(metric_names))
    if sum(col["metric_count"]) != len(metric_names):
        raise CheckpointError("the metric counts do not add up to the metric columns")
    symbols = [ScoreValue(symbol) for symbol in body["value_symbols"]]
    numeric = _optional(col["numeric"], col["numeric_set"])
    sizes = _optional(col["dataset_size"], col["dataset_size_set"])
    selected: list[int | None] = [None] * n  # a v2 piece holds no selections
    if body["selected_samples"] is not None:
        selected = _optional(
            _unpack("q", body["selected_samples"], n), _unpack("B", body["selected_samples_set"], n)
        )
    shape_keys = list(zip(col["epochs"], sizes, selected, strict=True))
    distinct = {key: Shape(*key) for key in set(shape_keys)}  # one object per shape
    shapes = [distinct[key] for key in shape_keys]
    metrics: list[tuple[tuple[str, float], ...]] = []
    cursor = 0
    for count in col["metric_count"]:
        metrics.append(tuple(zip(metric_names[cursor : cursor + count],
                                 metric_values[cursor : cursor + count], strict=True)))  # fmt: skip
        cursor += count
    rows = of_columns(
        body["sample_id"], col["sample_index"], col["epoch"],
        [symbols[value] for value in col["value"]], numeric, col["degraded"], metrics,
        col["input_tokens"], col["output_tokens"], col["total_tokens"], col["reasoning_tokens"],
        col["cost"], col["spent"], col["generation_time_ms"], shapes, col["created_at_ms"],
    )  # fmt: skip
    runs: list[RunRows] = []
    start = 0
    for run in body["runs"]:
        run_key = RunKey(run["run_id"], run["benchmark_id"], run["model"])
        runs.append((run_key, rows[start : start + run["contributions"]]))
        start += run["contributions"]
    return runs


_ROW_COLUMNS = {
    "sample_index": "q",
    "epoch": "q",
    "value": "B",
    "numeric": "d",
    "numeric_set": "B",
    "degraded": "B",
    "metric_count": "q",
    "input_tokens": "q",
    "output_tokens": "q",
    "total_tokens": "q",
    "reasoning_tokens": "q",
    "cost": "d",
    "spent": "d",
    "generation_time_ms": "q",
    "epochs": "q",
    "dataset_size": "q",
    "dataset_size_set": "B",
    "created_at_ms": "q",
}
