"""`resultlog export --out` never destroys a file it does not own: FIFOs, character devices
and symlinks stay what they were, and a kind it cannot write is refused in one line."""

from __future__ import annotations

import io
import os
import stat
import threading
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from resultlog.analysis import samples_df
from tests.support.cli import child_env, one_line_error, run_cli
from tests.support.kafka import drop_topics, topic_settings

pytestmark = pytest.mark.faults

_KEY = ("--run-id", "ex", "--benchmark", "arith", "--model", "demo/model")
_NULL, _FULL = os.makedev(1, 3), os.makedev(1, 7)  # the kernel's null and full devices


def _node(path: Path, kind: int, device: int = 0) -> Path:
    os.mknod(path, kind | 0o666, device)
    return path


def _written(env: dict[str, str], out: str, fmt: str = "csv") -> str:
    done = run_cli(env, "export", *_KEY, "--format", fmt, "--out", out)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_export_leaves_fifos_devices_and_symlinks_what_they_were(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Export to a FIFO, a character device of the test's own and a symlink: each stays."""
    if os.geteuid() != 0:
        pytest.skip("mknod of a character device needs root")
    settings = topic_settings(kafka_bootstrap)
    try:
        env = child_env(settings)
        made = run_cli(env, "run", "arith", "--model", "demo/model", "--run-id", "ex",
                       "--limit", "6")  # fmt: skip
        assert made.returncode == 0, made.stderr
        expected = samples_df("ex", "arith", "demo/model", kafka=settings)
        assert len(expected) == 6

        fifo = tmp_path / "pipe"
        os.mkfifo(fifo)
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
        reader.start()
        _written(env, str(fifo), "parquet")
        reader.join(60)
        assert stat.S_ISFIFO(fifo.lstat().st_mode)
        table = pq.read_table(io.BytesIO(got[0])).to_pandas()
        pd.testing.assert_frame_equal(table, expected)

        null = _node(tmp_path / "mynull", stat.S_IFCHR, _NULL)
        _written(env, str(null))
        assert stat.S_ISCHR(null.lstat().st_mode) and null.lstat().st_rdev == _NULL

        full = _node(tmp_path / "myfull", stat.S_IFCHR, _FULL)
        said = one_line_error(run_cli(env, "export", *_KEY, "--format", "csv", "--out", str(full)))
        assert "No space left" in said
        assert stat.S_ISCHR(full.lstat().st_mode) and full.lstat().st_rdev == _FULL

        real = tmp_path / "real.csv"
        real.write_text("old")
        link = tmp_path / "link.csv"
        link.symlink_to(real)
        _written(env, str(link))
        assert link.is_symlink() and os.readlink(link) == str(real)
        assert pd.read_csv(real)["sample_id"].tolist() == expected["sample_id"].tolist()

        to_device = tmp_path / "to-null"
        to_device.symlink_to(null)
        _written(env, str(to_device))
        assert to_device.is_symlink() and stat.S_ISCHR(null.lstat().st_mode)

        block = _node(tmp_path / "block", stat.S_IFBLK, os.makedev(7, 0))
        said = one_line_error(run_cli(env, "export", *_KEY, "--format", "csv", "--out", str(block)))
        assert "block device" in said and stat.S_ISBLK(block.lstat().st_mode)

        printed = _written(env, "-")
        assert printed.splitlines()[1:] == real.read_text().splitlines()[1:]
    finally:
        drop_topics(settings)
