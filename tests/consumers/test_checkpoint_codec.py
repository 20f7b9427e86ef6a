"""The checkpoint codec: exact round trips, pieces under Kafka's message size, refusals."""

from __future__ import annotations

import io
import struct
from typing import Any

import fastavro
import pytest

from resultlog.consumers.aggregator.checkpoint._codec import (
    CheckpointError,
    CheckpointId,
    Header,
    OldCheckpointError,
    Piece,
    decode,
    encode_header,
    iter_pieces,
    parse_piece_key,
    piece_key,
    restore_rows,
)
from resultlog.consumers.fold import Contribution, RunFold
from resultlog.schemas import RunKey, shipped_catalog
from tests.support.checkpoints import v1_header
from tests.support.records import make_record

CHECKPOINT = CheckpointId("results", 2, 6, 9, "w1", 12345)
ODD_FLOATS = [0.1, -0.0, 5e-324, 0.9999999999999999, 1 / 3, 2.0**-1000]


def _fold(run_key: RunKey, count: int, **fields: Any) -> RunFold:
    folded = RunFold(run_key)
    for i in range(count):
        odd = ODD_FLOATS[i % len(ODD_FLOATS)]
        folded.apply(
            make_record(
                i,
                i % 2,
                "CIS"[i % 3],
                run_key=run_key,
                epochs=2,
                dataset_size=None if i == 0 else count,  # the shape changes once
                numeric=odd if i % 5 else None,
                metrics={"reward": odd, f"m{i % 3}": -odd},
                cost=abs(odd) % 1.0,
                created_offset_ms=i,
                **fields,
            )
        )
    return folded


def _bits(items: list[Contribution]) -> list[tuple[object, ...]]:
    """Contributions with every float as its bits, sorted by key."""

    def bits(value: object) -> object:
        return struct.pack("<d", value) if isinstance(value, float) else value

    return sorted(
        tuple(
            tuple(tuple(bits(v) for v in pair) for pair in item.metrics)
            if name == "metrics"
            else bits(getattr(item, name))
            for name in Contribution.FIELDS
        )
        for item in items
    )


def test_a_round_trip_restores_every_contribution_bit_for_bit() -> None:
    runs = {k: _fold(k, 300) for k in (RunKey("a", "b", "m/1"), RunKey("é/x", "b", "m"))}
    picked = RunKey("picked", "b", "m")
    runs[picked] = _fold(picked, 300, selected_samples=250)
    runs[RunKey("empty", "b", "m")] = RunFold(RunKey("empty", "b", "m"))
    rows = [(k, f.contributions()) for k, f in runs.items()]
    pieces = [decode(value) for value in iter_pieces(CHECKPOINT, rows)]
    assert all(isinstance(p, Piece) and p.id == CHECKPOINT for p in pieces)
    restored = _restored([p for p in pieces if isinstance(p, Piece)])
    assert restored.keys() == runs.keys()
    for run_key, folded in runs.items():
        assert _bits(restored[run_key].contributions()) == _bits(folded.contributions())
        assert restored[run_key].summary() == folded.summary()
        assert restored[run_key].spent == folded.spent


def test_a_piece_of_the_previous_format_restores_without_selections() -> None:
    folded = _fold(RunKey("a", "b", "m"), 50, selected_samples=40)
    [value] = iter_pieces(CHECKPOINT, [(folded.run_key, folded.contributions())])
    v2, v3 = shipped_catalog().versions("resultlog.AggregatorCheckpoint")[1:]
    datum = fastavro.schemaless_reader(io.BytesIO(value[10:]), v3.parsed, None)
    out = io.BytesIO()
    out.write(b"\xc3\x01" + v2.fingerprint)
    fastavro.schemaless_writer(out, v2.parsed, datum)
    piece = decode(out.getvalue())
    assert isinstance(piece, Piece)
    [(_, items)] = piece.runs
    assert {item.shape.selected for item in items} == {None}
    unselected = [(item.key, item.shape._replace(selected=None)) for item in folded.contributions()]
    assert sorted((item.key, item.shape) for item in items) == sorted(unselected)


def test_a_large_state_is_cut_into_pieces_under_a_megabyte() -> None:
    big = _fold(RunKey("big", "b", "m"), 10_000)
    small = _fold(RunKey("small", "b", "m"), 10)
    values = list(
        iter_pieces(
            CHECKPOINT, [(big.run_key, big.contributions()), (small.run_key, small.contributions())]
        )
    )
    assert len(values) >= 3 and max(map(len, values)) < 1_000_000
    pieces = [decode(value) for value in values]
    assert [p.index for p in pieces if isinstance(p, Piece)] == list(range(len(values)))
    restored = _restored([p for p in pieces if isinstance(p, Piece)])
    assert restored[big.run_key].summary() == big.summary()
    assert restored[small.run_key].summary() == small.summary()


def test_long_sample_ids_still_fit() -> None:
    folded = _fold(RunKey("long", "b", "m"), 600, sample_id="x" * 2000)
    values = list(iter_pieces(CHECKPOINT, [(folded.run_key, folded.contributions())]))
    assert max(map(len, values)) < 1_000_000


def test_headers_and_keys_round_trip() -> None:
    header = Header(CHECKPOINT, 4, 1_700_000_000_000, 3, 1000)
    assert decode(encode_header(header)) == header
    key = piece_key(CHECKPOINT, 3)
    assert parse_piece_key(key) == ("results", 2, 9, "w1", 3)
    assert parse_piece_key(b"results/2/header") is None


@pytest.mark.parametrize(
    "key",
    [
        "resultlog.sample-results/\u00b2/1/w/0",  # isdigit() accepts a superscript two
        "results/2/\u0663/w/0",  # an Arabic-Indic three
        "results/2/99999999999999999999/w/0",  # a generation no Avro long holds once raised
        "results/2/-1/w/0",
        "results/2/1/w/ 3",
    ],
)
def test_garbage_piece_keys_are_not_pieces(key: str) -> None:
    assert parse_piece_key(key.encode()) is None


def test_a_header_names_the_exact_log() -> None:
    named = CheckpointId("results", 2, 6, 9, "w1", 12345, "cluster-a", "topic-id")
    found = decode(encode_header(Header(named, 1, 1_700_000_000_000, 1, 1)))
    assert isinstance(found, Header)
    assert (found.id.cluster_id, found.id.topic_id) == ("cluster-a", "topic-id")


def test_a_header_of_the_first_format_is_refused_as_old() -> None:
    with pytest.raises(OldCheckpointError, match="older version"):
        decode(v1_header(CHECKPOINT, 1, 1, 1))


@pytest.mark.parametrize(
    "value",
    [b"", b"\x00\x00\x00\x00\x01xyz", b"\xc3\x01" + bytes(8) + b"x", None],
    ids=["empty", "registry framing", "unknown fingerprint", "truncated"],
)
def test_bytes_that_are_not_a_checkpoint_are_refused(value: bytes | None) -> None:
    if value is None:
        value = encode_header(Header(CHECKPOINT, 1, 1, 1, 1))[:-3]
    with pytest.raises(CheckpointError):
        decode(value)


def test_a_piece_whose_columns_disagree_is_refused() -> None:
    folded = _fold(RunKey("a", "b", "m"), 20)
    value = next(iter_pieces(CHECKPOINT, [(folded.run_key, folded.contributions())]))
    with pytest.raises(CheckpointError):
        decode(value[:-40])


def _restored(pieces: list[Piece]) -> dict[RunKey, RunFold]:
    return {k: RunFold.restore(k, items) for k, items in restore_rows(pieces).items()}
