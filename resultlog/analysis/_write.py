"""Tables to files, atomically: a temporary file beside the target, then a rename."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from resultlog.analysis.errors import AnalysisError

__all__ = ["FORMATS", "check_writable", "write_table"]


def _parquet(table: pd.DataFrame, path: Path) -> None:
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    # An id column with no value would be a dictionary of nulls, which reads back as objects:
    # a dictionary of strings reads back as the categorical it is.
    fields = [
        pa.field(f.name, pa.dictionary(f.type.index_type, pa.string()))
        if pa.types.is_dictionary(f.type) and pa.types.is_null(f.type.value_type)
        else f
        for f in arrow.schema
    ]
    pq.write_table(arrow.cast(pa.schema(fields, metadata=arrow.schema.metadata)), path)


def _csv(table: pd.DataFrame, path: Path) -> None:
    table.to_csv(path, index=False)


def _jsonl(table: pd.DataFrame, path: Path) -> None:
    table.to_json(
        path, orient="records", lines=True, date_format="iso", date_unit="us", force_ascii=False
    )


_WRITERS: dict[str, Callable[[pd.DataFrame, Path], None]] = {
    "parquet": _parquet,
    "csv": _csv,
    "jsonl": _jsonl,
}
FORMATS = tuple(_WRITERS)


def check_writable(path: Path) -> None:
    """Refuse, before any reading, a path no table can be written to (one line naming it)."""
    if path.is_dir():
        raise AnalysisError(f"cannot write {path}: it is a directory")
    parent = path.parent
    if not parent.is_dir():
        raise AnalysisError(f"cannot write {path}: no directory {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise AnalysisError(f"cannot write {path}: directory {parent} is not writable")


def write_table(table: pd.DataFrame, path: str | os.PathLike[str], fmt: str) -> Path:
    """Write `table` to `path` as parquet, csv or jsonl; a failed write leaves no file behind.

    The table goes to a temporary file in the target's directory, is flushed to disk, and
    only then renamed over the target, so a reader sees the old file or the whole new one.
    """
    if fmt not in _WRITERS:
        raise AnalysisError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    target = Path(path)
    check_writable(target)
    try:
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise AnalysisError(f"cannot write {target}: {exc.strerror or exc}") from exc
    os.close(handle)
    temporary = Path(name)
    try:
        _WRITERS[fmt](table, temporary)
        with temporary.open("rb") as written:
            os.fsync(written.fileno())
        temporary.chmod(0o666 & ~_umask())  # mkstemp's 0600 is not what a user's file gets
        temporary.replace(target)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise AnalysisError(f"cannot write {target}: {exc.strerror or exc}") from exc
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return target


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current
