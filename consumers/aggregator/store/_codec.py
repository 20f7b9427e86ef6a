"""The state store's bytes (and its changelog's): keys of one partition's runs, exact
contributions, samples, totals.

Keys: `T<run key>` a run's totals, `L<run key>\\0<sample_index><epoch>` a key's latest
contribution, `S<run key>\\0<sample id>` a sample's epochs; the run key is its percent-encoded
form, which never holds a NUL, so each run's entries share a prefix. Doubles are stored as
IEEE bytes and scaled sums as integers, so what is read back holds the bits that were written.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

from resultlog.consumers._contribution import Memo, Verdict, shape_of, verdict_of
from resultlog.consumers.errors import ConsumerError
from resultlog.consumers.fold import Contribution, FoldState, Sample
from resultlog.schemas import RunKey, ScoreValue, decode_run_key, encode_run_key

__all__ = [
    "FENCE",
    "GENERATION_KEY",
    "LATEST",
    "META",
    "SAMPLES",
    "TAG_SIZE",
    "TOTALS",
    "StoreFormatError",
    "changelog_messages",
    "decode_contribution",
    "decode_sample",
    "decode_totals",
    "encode_contribution",
    "encode_sample",
    "encode_totals",
    "latest_key",
    "latest_of_key",
    "run_of_totals",
    "run_prefix",
    "totals_key",
    "untag",
    "untagged",
]

META = b"\x00meta"
# The "whole state from here" record that begins each generation of a partition's changelog
# (its value: the generation's ID), written before the whole state, and kept in the store
# like any entry. One key for every generation of a partition, on purpose: compaction keeps
# a key's latest record, so the current generation's marker survives compaction for as
# long as the changelog lives, and a later generation's marker supersedes (lets compaction
# remove) the earlier ones, whose records the later whole state replaces. A restore that
# ends with this key's value differing from the generation its last flush names did not
# reach the whole state it builds on, and is refused.
GENERATION_KEY = b"\x00generation"
# A changelog record that begins a writer's records: `FENCE + tag`, one key per writer, so
# compaction never removes it while later records of the partition stand.
FENCE = b"\x00fence:"
TAG_SIZE = 8  # every changelog value ends with its writer's tag (a tombstone has none)
TOTALS = b"T"
LATEST = b"L"
SAMPLES = b"S"
_FIXED = struct.Struct("<qqqBBdBqqqqddqqBqBqHI")
_METRIC = struct.Struct("<Hd")
_SAMPLE = struct.Struct("<qq")
_KEY = struct.Struct(">qq")
_VALUES = tuple(ScoreValue)
_VALUE_INDEX = {value: index for index, value in enumerate(_VALUES)}


class StoreFormatError(ConsumerError, ValueError):
    """Bytes in the state store that are not what this version writes."""


def run_prefix(kind: bytes, run_key: RunKey) -> bytes:
    """The prefix of a run's entries of one kind (LATEST or SAMPLES)."""
    return kind + encode_run_key(run_key) + b"\x00"


def totals_key(run_key: RunKey) -> bytes:
    """The key of a run's totals."""
    return TOTALS + encode_run_key(run_key)


def run_of_totals(key: bytes) -> RunKey:
    """The run key of a totals key."""
    return decode_run_key(key[len(TOTALS) :])


def latest_key(prefix: bytes, key: tuple[int, ...]) -> bytes:
    """The store key of one (sample_index, epoch) under a run's LATEST prefix."""
    return prefix + _KEY.pack(*key)


def latest_of_key(raw: bytes, start: int) -> tuple[int, ...]:
    """The (sample_index, epoch) of a store key whose run prefix ends at `start`."""
    return tuple(_KEY.unpack_from(raw, start))


# The fields a verdict decides, as `_FIXED` packs them, and its metrics' bytes.
_VerdictParts = tuple[int, bool, float, bool, int, bool, int, bool, int, int, bytes]


def encode_contribution(item: Contribution) -> bytes:
    """Every field of a contribution, exactly."""
    sample_id = item.sample_id.encode("utf-8", "surrogatepass")
    (value, numeric_set, numeric, degraded, epochs, size_set, size, selected_set, selected,
     metric_count, metrics) = _verdict_parts.of(item.verdict)  # fmt: skip
    return b"".join((
        _FIXED.pack(
            item.sample_index, item.epoch, item.created_at_ms, value, numeric_set, numeric,
            degraded, item.input_tokens, item.output_tokens, item.total_tokens,
            item.reasoning_tokens, item.cost, item.spent, item.generation_time_ms, epochs,
            size_set, size, selected_set, selected, metric_count, len(sample_id),
        ),
        sample_id,
        metrics,
    ))  # fmt: skip


def _parts_of(verdict: Verdict) -> _VerdictParts:
    """What `_FIXED` holds of a verdict, and the bytes of its metrics."""
    shape, numeric = verdict.shape, verdict.numeric
    size, selected = shape.dataset_size, shape.selected
    metrics = []
    for name, value in verdict.metrics:
        raw = name.encode("utf-8", "surrogatepass")
        metrics.append(_METRIC.pack(len(raw), value))
        metrics.append(raw)
    return (
        _VALUE_INDEX[verdict.value], numeric is not None, 0.0 if numeric is None else numeric,
        verdict.degraded, shape.epochs, size is not None, size or 0, selected is not None,
        selected or 0, len(verdict.metrics), b"".join(metrics),
    )  # fmt: skip


# By verdict object (hashed by identity): most records of a run share one.
_verdict_parts: Memo[Verdict, _VerdictParts] = Memo(_parts_of, 1 << 12)


def decode_contribution(raw: bytes) -> Contribution:
    """The contribution `encode_contribution` wrote."""
    try:
        (sample_index, epoch, created_at_ms, value, numeric_set, numeric, degraded, input_tokens,
         output_tokens, total_tokens, reasoning_tokens, cost, spent, generation_time_ms, epochs,
         size_set, size, selected_set, selected, metric_count,
         id_length) = _FIXED.unpack_from(raw)  # fmt: skip
        cursor = _FIXED.size + id_length
        sample_id = raw[_FIXED.size : cursor].decode("utf-8", "surrogatepass")
        metrics = []
        for _ in range(metric_count):
            length, metric = _METRIC.unpack_from(raw, cursor)
            cursor += _METRIC.size
            metrics.append((raw[cursor : cursor + length].decode("utf-8", "surrogatepass"), metric))
            cursor += length
        if cursor != len(raw):
            raise StoreFormatError(f"a contribution of {len(raw)} bytes holds {cursor}")
        verdict = verdict_of(
            _VALUES[value],
            numeric if numeric_set else None,
            bool(degraded),
            tuple(metrics),
            shape_of(epochs, size if size_set else None, selected if selected_set else None),
        )
        return Contribution(
            sample_id, (sample_index, epoch), verdict,
            (input_tokens, output_tokens, total_tokens, reasoning_tokens), cost, spent,
            generation_time_ms, created_at_ms,
        )  # fmt: skip
    except (struct.error, UnicodeDecodeError, IndexError) as exc:
        raise StoreFormatError(f"an undecodable contribution: {exc}") from exc


def encode_sample(sample: Sample) -> bytes:
    """A sample's epochs, kept epochs and exact scaled points."""
    return _SAMPLE.pack(sample.epochs, sample.kept) + _int_bytes(sample.points)


def decode_sample(raw: bytes) -> Sample:
    """The sample `encode_sample` wrote."""
    try:
        epochs, kept = _SAMPLE.unpack_from(raw)
    except struct.error as exc:
        raise StoreFormatError(f"an undecodable sample: {exc}") from exc
    return Sample(epochs, kept, int.from_bytes(raw[_SAMPLE.size :], "little", signed=True))


def encode_totals(state: FoldState, latest: int) -> bytes:
    """A run's totals and how many per-key entries it has."""
    newest = state.newest
    body = {
        "latest": latest,
        "spent": state.spent,
        "newest": None if newest is None else _text(encode_contribution(newest)),
        "ints": [
            state.records,
            state.degraded,
            state.not_skipped,
            *state.tokens,
            state.cost,
            state.generation_time_ms,
            state.answered,
            state.skipped,
            state.correct,
        ],
        "metric_sums": state.metric_sums,
        "metric_counts": state.metric_counts,
        "points_by_kept": [[kept, points] for kept, points in state.points_by_kept.items()],
        "scorers": {
            name: [[sample_id, count, total] for sample_id, (count, total) in held.items()]
            for name, held in state.scorers.items()
        },
    }
    return json.dumps(body, separators=(",", ":")).encode()


def decode_totals(raw: bytes) -> tuple[FoldState, int]:
    """What `encode_totals` wrote: the fold state and its per-key entry count."""
    try:
        body: dict[str, Any] = json.loads(raw)
        newest = body["newest"]
        (records, degraded, not_skipped, t0, t1, t2, t3, cost, time_ms, answered, skipped,
         correct) = body["ints"]  # fmt: skip
        state = FoldState(
            spent=body["spent"],
            newest=None if newest is None else decode_contribution(base64.b64decode(newest)),
            records=records,
            degraded=degraded,
            not_skipped=not_skipped,
            tokens=(t0, t1, t2, t3),
            cost=cost,
            generation_time_ms=time_ms,
            metric_sums={str(k): int(v) for k, v in body["metric_sums"].items()},
            metric_counts={str(k): int(v) for k, v in body["metric_counts"].items()},
            answered=answered,
            skipped=skipped,
            correct=correct,
            points_by_kept={int(kept): int(points) for kept, points in body["points_by_kept"]},
            scorers={
                str(name): {str(s): (int(c), int(t)) for s, c, t in held}
                for name, held in body["scorers"].items()
            },
        )
        return state, int(body["latest"])
    except StoreFormatError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreFormatError(f"undecodable run totals: {exc!r}") from exc


def _int_bytes(value: int) -> bytes:
    return value.to_bytes(value.bit_length() // 8 + 1, "little", signed=True)


def _text(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def changelog_messages(
    entries: list[tuple[bytes, bytes | None]], tag: bytes
) -> list[dict[str, Any]]:
    """Entries as the changelog producer's `produce_batch` takes them, in order, each value
    ending with the writer's tag (compiled: a flush builds one per entry)."""
    return [{"key": key, "value": None if value is None else value + tag} for key, value in entries]


def _state(key: bytes) -> bool:
    """Whether a changelog key is state or a marker (not a fence, nor another's record)."""
    return key[:1] != b"\x00" or key in (META, GENERATION_KEY)


def untag(value: bytes | None) -> bytes | None:
    """A changelog value without its writer's tag."""
    return None if value is None else value[:-TAG_SIZE]


def untagged(
    records: list[tuple[bytes, bytes | None]], writer: bytes | None, foreign: set[bytes]
) -> tuple[list[tuple[bytes, bytes | None]], bytes | None]:
    """Changelog records without their tags (fences left out), and the writer whose records
    come last.

    A fence names the writer of every record after it (`writer`: the one named before these
    records; None: any). The keys of records another writer wrote after it, a writer fenced
    off whose writes arrived late, are added to `foreign`, and leave it when a later record
    of the key supersedes theirs (compiled: a restore checks every record).
    """
    entries: list[tuple[bytes, bytes | None]] = []
    append = entries.append
    fence = len(FENCE)
    for key, value in records:
        if value is None:
            if foreign:
                foreign.discard(key)
            append((key, None))
            continue
        if key[:fence] == FENCE:
            writer = key[fence:]
            continue  # not state: no store holds it
        if writer is not None and value[-TAG_SIZE:] != writer and _state(key):
            foreign.add(key)
        elif foreign:
            foreign.discard(key)
        append((key, value[:-TAG_SIZE]))
    return entries, writer
