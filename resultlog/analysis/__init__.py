"""Runs and samples of the log as pandas DataFrames, and the same tables as files.

Needs the `analysis` extra (`pip install 'resultlog[analysis]'`: pandas, pyarrow); the rest
of resultlog never imports this package. The tables are read through the readers replay and
the aggregator use, so their counts and accuracy equal `resultlog replay --json` bit for bit.

- `runs_df(benchmark=None, model=None, run_id=None)`: one row per run key;
- `samples_df(run_id, benchmark, model, runs=..., full=False)`: one row per (sample, epoch);
- `compare_df(a, b)`: two runs of one benchmark, per shared sample, as `GET /compare`;
- `write_table(table, path, fmt)`: parquet, csv or jsonl, atomically.
"""

from __future__ import annotations

try:
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is installed by `make install`
    raise ImportError(
        f"resultlog.analysis needs the analysis extra ({exc.name} is missing): "
        "pip install '/path/to/resultlog[analysis]' (a checkout or a wheel)"
    ) from exc

from resultlog.analysis._frames import COMPARE_COLUMNS, FULL_COLUMNS, RUN_COLUMNS, SAMPLE_COLUMNS
from resultlog.analysis._tables import Progress, Source, compare_df, runs_df, samples_df
from resultlog.analysis._write import FORMATS, check_writable, write_table
from resultlog.analysis.errors import AnalysisError

__all__ = [
    "COMPARE_COLUMNS",
    "FORMATS",
    "FULL_COLUMNS",
    "RUN_COLUMNS",
    "SAMPLE_COLUMNS",
    "AnalysisError",
    "Progress",
    "Source",
    "check_writable",
    "compare_df",
    "runs_df",
    "samples_df",
    "write_table",
]
