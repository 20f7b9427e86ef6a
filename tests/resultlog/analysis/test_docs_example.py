"""The analysis page's worked example runs as written, and the page lists every column."""

from __future__ import annotations

import re
import struct
import subprocess
import sys
from pathlib import Path

import pandas as pd

from resultlog.analysis import compare_df, runs_df, samples_df
from tests.resultlog.analysis.support import INSPECT, A, B, Made

PAGE = Path(__file__).resolve().parents[3] / "docs" / "analysis.md"
_PYTHON = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
_PNG = b"\x89PNG\r\n\x1a\n"


def test_the_pages_python_runs_against_real_runs_and_saves_a_png(
    made: Made, tmp_path: Path
) -> None:
    blocks = _PYTHON.findall(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 4  # the tables, the difference and flips, the samples, the plot
    script = tmp_path / "example.py"
    script.write_text("\n".join(blocks), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**made.env, "MPLBACKEND": "Agg"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert A.model in done.stdout and B.model in done.stdout
    assert "b - a = " in done.stdout
    png = (tmp_path / "accuracy.png").read_bytes()
    assert png[:8] == _PNG
    assert png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 0 and height > 0
    assert len(png) > 1000  # something was drawn


def test_the_page_lists_every_column(made: Made) -> None:
    page = PAGE.read_text(encoding="utf-8")
    tables = [
        runs_df(kafka=made.settings),
        samples_df(full=True, kafka=made.settings),
        compare_df(A, B, kafka=made.settings),
        compare_df(INSPECT, A, kafka=made.settings),
    ]
    for table in tables:
        for column in table.columns:
            documented = _documented_as(column)
            assert f"| `{documented}` |" in page, f"{column} is not documented"
    compared = tables[2]
    for key in compared.attrs:
        assert f'attrs["{key}"]' in page, f"attrs[{key!r}] is not documented"
    assert isinstance(compared, pd.DataFrame)


def _documented_as(column: str) -> str:
    for prefix, pattern in (("metric.", "metric.<name>"), ("config.", "config.<field>")):
        if column.startswith(prefix):
            return pattern
    return column
