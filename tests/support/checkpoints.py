"""Checkpoint records as an older aggregator wrote them."""

from __future__ import annotations

import io

import fastavro

from resultlog.consumers.aggregator.checkpoint._codec import CheckpointId
from resultlog.schemas import shipped_catalog

__all__ = ["v1_header"]


def v1_header(checkpoint: CheckpointId, pieces: int, runs: int, contributions: int) -> bytes:
    """A header value in the first checkpoint format, which named no cluster or topic ID."""
    v1 = shipped_catalog().versions("resultlog.AggregatorCheckpoint")[0]
    assert v1.version == 1
    c = checkpoint
    datum = {
        "format_version": 1, "results_topic": c.results_topic, "partition": c.partition,
        "partitions": c.partitions, "generation": c.generation, "writer": c.writer,
        "next_offset": c.next_offset,
        "body": ("resultlog.CheckpointHeader",
                 {"pieces": pieces, "written_at_ms": 2**62, "runs": runs,
                  "contributions": contributions}),
    }  # fmt: skip
    out = io.BytesIO()
    out.write(b"\xc3\x01" + v1.fingerprint)
    fastavro.schemaless_writer(out, v1.parsed, datum)
    return out.getvalue()
