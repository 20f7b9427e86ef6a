"""The runs table's headers say what each number counts, as a tooltip."""

from __future__ import annotations

import httpx

from resultlog.settings import Settings
from tests.support.aggregator import serving_aggregator


def test_the_runs_table_headers_explain_accuracy_correct_and_spend(settings: Settings) -> None:
    with serving_aggregator(settings) as (_, url):
        html = httpx.get(f"{url}/parts/runs", timeout=10).text
    for header, title in (
        ("accuracy", "mean over the questions of each question&#x27;s score"),
        ("correct", "questions whose score averaged over epochs is at least 0.5, of all scored"),
        ("spent", "(simulated for the offline model)"),
    ):
        start = html.index(f">{header}</th>")
        opening = html.rindex("<th", 0, start)
        assert title in html[opening:start], header
