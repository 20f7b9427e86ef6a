"""The sdist installs without a C compiler: the build says so once and the twins run.

The sdist is built from a copy of the working tree (as a clone would have it), then installed
with the compiler hidden (CC=/bin/false, a PATH without gcc or cc) into a fresh venv outside
the repository, which borrows this venv's dependencies. Slow: two isolated builds.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path

import pytest

from tests.resultlog.test_wheel import _clean_env, _copy_of_the_tree

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

SAID = "building without the compiled fold path"
# Decode a record, fold it, and say which path ran: what a reader of the log does.
PROBE = """
from datetime import UTC, datetime
import resultlog
from resultlog.consumers import fold_records
from resultlog.schemas import Codec, RecordStatus, SampleResult, Score, ScoreValue
record = SampleResult(
    run_id="r", benchmark_id="b", model="m", sample_id="s-0", sample_index=0, epoch=0, epochs=1,
    status=RecordStatus.COMPLETED, score=Score(value=ScoreValue.C, explanation="ok"), input="q",
    created_at=datetime(2026, 1, 1, tzinfo=UTC),
)
codec = Codec()
view = codec.decode_fold_view(codec.encode_sample_result(record))
print(resultlog.__file__)
print(resultlog.fold_path())
print(fold_records([view]).accuracy)
"""


def _run(command: list[str], cwd: Path, **env: str) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=_clean_env(**env), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout + done.stderr


def test_the_sdist_installs_and_runs_the_twins_without_a_compiler(tmp_path: Path) -> None:
    source = _copy_of_the_tree(tmp_path / "source")
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--sdist", "--outdir", str(dist)], source)
    (sdist,) = dist.glob("resultlog-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"setup.py", "resultlog/_hotpath.py", "consumers/fold.py"} <= names
    assert not [name for name in names if name.endswith(".so")]

    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=300)
    site = Path(
        sysconfig.get_path("purelib", vars={"base": str(env_dir), "platbase": str(env_dir)})
    )
    # This venv's packages, behind the new venv's own (a .pth line appends to sys.path).
    (site / "borrowed.pth").write_text(sysconfig.get_path("purelib") + "\n")
    no_compiler = tmp_path / "bin"  # a PATH where neither gcc nor cc is found
    no_compiler.mkdir()
    pip = [str(env_dir / "bin" / "python"), "-m", "pip"]
    built = _run(
        [*pip, "install", "-v", "--no-deps", str(sdist)],
        tmp_path,
        CC="/bin/false",
        PATH=str(no_compiler),
    )
    assert built.count(SAID) == 1, built[-3000:]
    assert not list(site.glob("resultlog/**/*.so"))

    outside = tmp_path / "outside"
    outside.mkdir()
    ran = _run([str(env_dir / "bin" / "python"), "-c", PROBE], outside).splitlines()
    assert ran[0].startswith(str(site)), ran
    assert ran[1].startswith("pure Python (the compiled fold path is not built"), ran
    assert ran[2] == "1.0", ran
