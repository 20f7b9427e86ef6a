"""Harness payloads: an Inspect sample with its task's spec and plan, zstd JSON, bounded."""

from __future__ import annotations

import secrets

import pytest
import zstandard
from inspect_ai.log import EvalLog, EvalSample

from resultlog.producer.inspect import InspectPluginError
from resultlog.producer.inspect._payload import decode, encode, task_header
from resultlog.schemas.models import MAX_HARNESS_PAYLOAD


@pytest.fixture
def sample(mock_log: EvalLog) -> EvalSample:
    """A finished sample with its events."""
    [first, *_] = mock_log.samples or []
    return first


def test_a_payload_round_trips_the_sample_spec_and_plan(
    mock_log: EvalLog, sample: EvalSample
) -> None:
    payload = encode(task_header(mock_log.eval, mock_log.plan), sample)
    assert payload.form == "full" and len(payload.data) <= MAX_HARNESS_PAYLOAD
    stored = decode(payload.data)
    assert (stored.sample, stored.spec, stored.plan) == (sample, mock_log.eval, mock_log.plan)


def test_an_oversized_sample_drops_its_events_then_keeps_only_what_metrics_read(
    mock_log: EvalLog, sample: EvalSample
) -> None:
    header = task_header(mock_log.eval, mock_log.plan)
    full = encode(header, sample)
    no_events = encode(header, sample, limit=len(full.data) - 1)
    assert no_events.form == "no_events"
    assert decode(no_events.data).sample.events == []
    minimal = encode(header, sample, limit=len(no_events.data) - 1)
    assert minimal.form == "minimal"
    kept = decode(minimal.data).sample
    assert (kept.id, kept.epoch, kept.scores, kept.model_usage) == (
        sample.id,
        sample.epoch,
        sample.scores,
        sample.model_usage,
    )
    assert kept.messages == [] and kept.events == []
    assert full.full_json_bytes == no_events.full_json_bytes == minimal.full_json_bytes


def test_a_sample_too_large_even_bare_is_refused(mock_log: EvalLog, sample: EvalSample) -> None:
    epoch = sample.epoch - 1  # as records count epochs: the one message names one epoch
    with pytest.raises(InspectPluginError, match=f"epoch {epoch} is too large for the results"):
        encode(task_header(mock_log.eval, mock_log.plan), sample, limit=100)


def test_an_input_larger_than_the_bound_keeps_the_scores_in_a_bare_payload(
    mock_log: EvalLog, sample: EvalSample
) -> None:
    huge = sample.model_copy(update={"input": secrets.token_hex(600_000)})  # 1.2 MB, random
    payload = encode(task_header(mock_log.eval, mock_log.plan), huge)
    assert payload.form == "bare" and payload.full_json_bytes > 1_200_000
    kept = decode(payload.data).sample
    assert (kept.id, kept.epoch, kept.scores) == (sample.id, sample.epoch, sample.scores)


@pytest.mark.parametrize(
    "data",
    [b"not zstd", zstandard.ZstdCompressor().compress(b'{"sample": {}}')],
)
def test_what_is_not_a_payload_is_an_inspect_plugin_error(data: bytes) -> None:
    with pytest.raises(InspectPluginError, match="unreadable Inspect harness payload"):
        decode(data)
