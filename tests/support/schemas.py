"""Schema versions that exist only for tests."""

from __future__ import annotations

from pathlib import Path

from resultlog.schemas import SchemaVersion
from resultlog.schemas._catalog import load_file

FIXTURES = Path(__file__).resolve().parents[1] / "schemas" / "fixtures"


def fixture_v4() -> SchemaVersion:
    """An unreleased SampleResult v4 kept as a test fixture: fields added with defaults."""
    return load_file(FIXTURES / "sample_result.v4.avsc")
