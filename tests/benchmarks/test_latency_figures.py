"""The latency benchmark's percentiles hold for any number of measured records."""

from __future__ import annotations

import math

from benchmarks.aggregator_latency import _figures, _percentile


def test_one_measured_record_is_every_percentile() -> None:
    # CI's smoke run once saw one raw-consumed record: quantiles() raised on it.
    assert _percentile([4.0], 50) == _percentile([4.0], 99) == 4.0
    assert "(n=1)" in _figures([4.0])


def test_no_measured_record_is_not_a_number_and_two_interpolate() -> None:
    assert math.isnan(_percentile([], 99))
    assert _percentile([1.0, 2.0], 50) == 1.5
