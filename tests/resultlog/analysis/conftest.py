"""The runs every analysis test reads, made once on topics of their own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.resultlog.analysis.support import Made, make_runs
from tests.support.kafka import drop_topics


@pytest.fixture(scope="package")
def made(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    """Runs A and B of two models on arith, a run re-run with fewer epochs, an Inspect eval."""
    runs = make_runs(kafka_bootstrap, tmp_path_factory.mktemp("inspect-logs"))
    yield runs
    drop_topics(runs.settings)
