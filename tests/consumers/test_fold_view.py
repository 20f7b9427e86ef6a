"""A contribution from a record's fold view equals the one from the whole record."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from resultlog.consumers.fold import Contribution, RunFold
from resultlog.schemas import Codec, SampleResult
from tests.support.framings import framings
from tests.support.strategies import sample_results

ROOT = Path(__file__).resolve().parents[2]
VECTORS = json.loads((ROOT / "schemas" / "conformance.json").read_text(encoding="utf-8"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record=sample_results())
def test_the_views_contribution_is_the_full_records_in_every_framing(
    record: SampleResult,
) -> None:
    for name, (codec, raw) in framings(record).items():
        full = Contribution.of(codec.decode_sample_result(raw))
        assert Contribution.of(codec.decode_fold_view(raw)) == full, name


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(sample_results(), min_size=1, max_size=8))
def test_folding_views_gives_the_summary_of_folding_records(records: list[SampleResult]) -> None:
    codec = Codec()
    run_key = records[0].run_key
    whole, viewed = RunFold(run_key), RunFold(run_key)
    for record in records:
        raw = codec.encode_sample_result(record)
        whole.apply(codec.decode_sample_result(raw))
        viewed.apply(Contribution.of(codec.decode_fold_view(raw)))
    assert viewed.summary() == whole.summary()


def test_golden_vectors_contribute_as_their_full_decodes() -> None:
    codec = Codec()
    for vector in VECTORS["records"]:
        raw = bytes.fromhex(vector["single_object_hex"])
        view = Contribution.of(codec.decode_fold_view(raw))
        assert view == Contribution.of(codec.decode_sample_result(raw)), vector["name"]
        assert view.created_at_ms == vector["datum"]["created_at"]
