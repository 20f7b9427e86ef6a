"""Rows into typed DataFrames: categoricals for ids, nullable integers, UTC timestamps.

Each table has fixed columns in a fixed order (present even when empty), then its dynamic
ones: `metric.<name>` (sorted), `config.<field>` (runs, sorted), and the full record's text
columns last (samples with `full=True`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
from pandas.api.types import pandas_dtype

from resultlog.analysis._rows import CONFIG_PREFIX, METRIC_PREFIX

__all__ = ["COMPARE_COLUMNS", "FULL_COLUMNS", "RUN_COLUMNS", "SAMPLE_COLUMNS", "frame"]

_ID = "category"
_INT = "Int64"
_FLOAT = "float64"
_NULLABLE_FLOAT = "Float64"
_TEXT = "string"
_TIME = "datetime64[us, UTC]"
_KEY = {"run_id": _ID, "benchmark_id": _ID, "model": _ID}

RUN_COLUMNS: Mapping[str, str] = {
    **_KEY,
    "records": _INT,
    "expected_records": _INT,
    "degraded_records": _INT,
    "total_questions": _INT,
    "correct_answers": _INT,
    "skipped_questions": _INT,
    "out_of_shape": _INT,
    "undecodable": _INT,
    "accuracy": _FLOAT,
    "accuracy_stderr": _FLOAT,
    "accuracy_ci_low": _FLOAT,
    "accuracy_ci_high": _FLOAT,
    "input_tokens": _INT,
    "output_tokens": _INT,
    "total_tokens": _INT,
    "reasoning_tokens": _INT,
    "total_cost": _FLOAT,
    "spent_cost": _FLOAT,
    "generation_time_ms": _INT,
    "first_record_at": _TIME,
    "last_record_at": _TIME,
    "config_fingerprint": _ID,
    "configs": _INT,
}
SAMPLE_COLUMNS: Mapping[str, str] = {
    **_KEY,
    "sample_id": _ID,
    "sample_index": _INT,
    "epoch": _INT,
    "epochs": _INT,
    "dataset_size": _INT,
    "selected_samples": _INT,
    "in_shape": "bool",
    "status": _ID,
    "degraded": "bool",
    "score_value": _ID,
    "score_numeric": _NULLABLE_FLOAT,
    "points": _NULLABLE_FLOAT,
    "score_answer": _TEXT,
    "input_tokens": _INT,
    "output_tokens": _INT,
    "total_tokens": _INT,
    "reasoning_tokens": _INT,
    "total_cost": _NULLABLE_FLOAT,
    "generation_time_ms": _INT,
    "attempts": _INT,
    "spent_cost": _NULLABLE_FLOAT,
    "error_kind": _ID,
    "http_status": _INT,
    "error_message": _TEXT,
    "config_fingerprint": _ID,
    "chunk_id": _ID,
    "chunk_index": _INT,
    "harness": _ID,
    "created_at": _TIME,
}
FULL_COLUMNS: Mapping[str, str] = {
    "input": _TEXT,
    "target": _TEXT,
    "score_explanation": _TEXT,
    "messages": _TEXT,
}
COMPARE_COLUMNS: Mapping[str, str] = {
    "sample_id": _ID,
    "a": _FLOAT,
    "b": _FLOAT,
    "difference": _FLOAT,
    "flip": _ID,
}


def frame(
    rows: Iterable[Mapping[str, Any]],
    fixed: Mapping[str, str],
    last: Mapping[str, str] | None = None,
) -> pd.DataFrame:
    """A typed DataFrame of `rows`: the `fixed` columns, the dynamic ones, then `last`."""
    data = pd.DataFrame.from_records(list(rows))
    tail = dict(last or {})
    known = {**fixed, **tail}
    dynamic = sorted(c for c in data.columns if c not in known)
    metrics = [c for c in dynamic if c.startswith(METRIC_PREFIX)]
    configs = [c for c in dynamic if c.startswith(CONFIG_PREFIX)]
    if len(metrics) + len(configs) != len(dynamic):  # a row builder and its table disagree
        raise ValueError(f"unexpected columns {sorted(set(dynamic) - {*metrics, *configs})}")
    columns: dict[str, pd.Series[Any]] = {}
    for name, dtype in fixed.items():
        columns[name] = _typed(data, name, dtype)
    for name in metrics:
        columns[name] = _typed(data, name, _NULLABLE_FLOAT)
    for name in configs:
        columns[name] = _loose(data[name])
    for name, dtype in tail.items():
        columns[name] = _typed(data, name, dtype)
    return pd.DataFrame(columns, index=pd.RangeIndex(len(data)))


def _typed(data: pd.DataFrame, name: str, dtype: str) -> pd.Series[Any]:
    """One column in its type (all missing if no row has it)."""
    if name not in data.columns:
        column = pd.Series([None] * len(data), dtype=_missing_dtype(dtype), name=name)
        return _category(column) if dtype == _ID else _as(column, dtype)
    column = data[name]
    if dtype == _TIME:
        return _as(pd.to_datetime(column, utc=True), _TIME)
    if dtype == _ID:
        return _category(column)
    return _as(column, dtype)


def _category(column: pd.Series[Any]) -> pd.Series[Any]:
    """Ids as a categorical of their sorted values; no values: object categories, as Parquet
    reads an all-null dictionary column back (so a written table reads back equal)."""
    values = [None if pd.isna(value) else str(value) for value in column.tolist()]
    found = sorted({value for value in values if value is not None})
    categories = pd.Index(found, dtype="str" if found else "object")
    return pd.Series(values, dtype=object, name=column.name, index=column.index).astype(
        pd.CategoricalDtype(categories)
    )


def _as(column: pd.Series[Any], dtype: str) -> pd.Series[Any]:
    return column.astype(pandas_dtype(dtype))


def _missing_dtype(dtype: str) -> str:
    """What a column of no values starts as before taking `dtype`."""
    return "object" if dtype in (_ID, _TEXT, "bool") else dtype


def _loose(column: pd.Series[Any]) -> pd.Series[Any]:
    """A configuration column: numbers, booleans or text when its values agree, else JSON."""
    kinds = {type(value) for value in column.dropna().tolist()}
    for agreeing, dtype in _LOOSE:
        if kinds <= agreeing:
            return _as(column, dtype)
    texts = [
        None if pd.isna(value) else value if isinstance(value, str) else json.dumps(value)
        for value in column.tolist()
    ]
    return pd.Series(texts, dtype=pandas_dtype(_TEXT), name=column.name, index=column.index)


_LOOSE: tuple[tuple[set[type], str], ...] = (
    ({bool}, "boolean"),
    ({int}, _INT),
    ({int, float}, _NULLABLE_FLOAT),
    ({str}, _TEXT),
)
