"""Tables to files: a regular file atomically (a temporary file beside it, then a rename), a
FIFO, a character device or standard output straight."""

from __future__ import annotations

import io
import os
import stat
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from resultlog.analysis.errors import AnalysisError

__all__ = ["FORMATS", "check_writable", "write_table"]


def _parquet(table: pd.DataFrame, out: Path | BinaryIO) -> None:
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    # An id column with no value would be a dictionary of nulls, which reads back as objects:
    # a dictionary of strings reads back as the categorical it is.
    fields = [
        pa.field(f.name, pa.dictionary(f.type.index_type, pa.string()))
        if pa.types.is_dictionary(f.type) and pa.types.is_null(f.type.value_type)
        else f
        for f in arrow.schema
    ]
    arrow = arrow.cast(pa.schema(fields, metadata=arrow.schema.metadata))
    if isinstance(out, Path):
        pq.write_table(arrow, out)
        return
    buffer = pa.BufferOutputStream()  # a pipe cannot seek: the whole file, then its bytes
    pq.write_table(arrow, buffer)
    out.write(memoryview(buffer.getvalue()))


def _csv(table: pd.DataFrame, out: Path | TextIO) -> None:
    table.to_csv(out, index=False)


def _jsonl(table: pd.DataFrame, out: Path | TextIO) -> None:
    table.to_json(
        out, orient="records", lines=True, date_format="iso", date_unit="us", force_ascii=False
    )


_TEXT_WRITERS: dict[str, Callable[[pd.DataFrame, Path | TextIO], None]] = {
    "csv": _csv,
    "jsonl": _jsonl,
}
FORMATS = ("parquet", *_TEXT_WRITERS)
STDOUT = "-"


@dataclass(frozen=True)
class Target:
    """Where a table goes: `path` (a symlink's target, written through: the link stays) and
    how: "file" (atomically, a temporary file renamed over it), "stream" (a FIFO or a
    character device, written straight) or "stdout"."""

    path: Path
    kind: str


def check_writable(path: Path) -> Target:
    """Refuse, before any reading, a path no table can be written to (one line naming it)."""
    if str(path) == STDOUT:
        return Target(path, "stdout")
    # A symlink is written through, never replaced: the file it names is what changes.
    resolved = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = resolved.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise AnalysisError(f"cannot write {path}: {exc.strerror or exc}") from exc
    if mode is not None and (stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)):
        if not os.access(resolved, os.W_OK):
            raise AnalysisError(f"cannot write {path}: it is not writable")
        return Target(resolved, "stream")
    if mode is not None and stat.S_ISDIR(mode):
        raise AnalysisError(f"cannot write {path}: it is a directory")
    if mode is not None and not stat.S_ISREG(mode):
        raise AnalysisError(
            f"cannot write {path}: it is a {_kind(mode)}, not a regular file, FIFO, "
            f"character device or - (standard output)"
        )
    parent = resolved.parent
    if not parent.is_dir():
        raise AnalysisError(f"cannot write {path}: no directory {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise AnalysisError(f"cannot write {path}: directory {parent} is not writable")
    return Target(resolved, "file")


def write_table(table: pd.DataFrame, path: str | os.PathLike[str], fmt: str) -> Path:
    """Write `table` to `path` as parquet, csv or jsonl; a failed write leaves no file behind.

    A regular file (or a new one) is written to a temporary file in the target's directory,
    flushed to disk, and only then renamed over the target, so a reader sees the old file or
    the whole new one. A FIFO, a character device or `-` (standard output) is written
    straight; a symlink is written through (the link stays a link); anything else is refused.
    """
    if fmt not in FORMATS:
        raise AnalysisError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    target = check_writable(Path(path))
    if target.kind == "file":
        return _replace(table, target.path, fmt)
    try:
        if target.kind == "stdout":
            _write_stream(table, sys.stdout.buffer, fmt)
        else:
            # O_CREAT never: a node removed meanwhile is refused, not replaced by a file.
            with os.fdopen(os.open(target.path, os.O_WRONLY), "wb") as stream:
                _write_stream(table, stream, fmt)
    except OSError as exc:
        raise AnalysisError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return target.path


def _write_stream(table: pd.DataFrame, stream: BinaryIO, fmt: str) -> None:
    if fmt == "parquet":
        _parquet(table, stream)
    else:
        text = io.TextIOWrapper(stream, encoding="utf-8", newline="")
        try:
            _TEXT_WRITERS[fmt](table, text)
            text.flush()
        finally:
            text.detach()
    stream.flush()


def _replace(table: pd.DataFrame, target: Path, fmt: str) -> Path:
    """Write a temporary file beside `target`, then rename it over `target`."""
    try:
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise AnalysisError(f"cannot write {target}: {exc.strerror or exc}") from exc
    os.close(handle)
    temporary = Path(name)
    try:
        if fmt == "parquet":
            _parquet(table, temporary)
        else:
            _TEXT_WRITERS[fmt](table, temporary)
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


def _kind(mode: int) -> str:
    if stat.S_ISBLK(mode):
        return "block device"
    return "socket" if stat.S_ISSOCK(mode) else "special file"


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current
