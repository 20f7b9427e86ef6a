"""Run mypy over the package as it is installed: schemas/, producer/, consumers/ as resultlog.*.

mypy finds modules by folder, and the top-level folders become sub-packages of `resultlog`
only through pyproject's package-dir mapping, which mypy does not read. So this mirrors the
sources into build/typecheck/ in the installed layout (copies, refreshed when changed), runs
mypy there with the project's configuration, and prints every path as it is in the repository.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TREE = REPO / "build" / "typecheck"
# Where each source folder lives in the installed layout (pyproject's package-dir).
LAYOUT = {
    "resultlog": "resultlog",
    "schemas": "resultlog/schemas",
    "producer": "resultlog/producer",
    "consumers": "resultlog/consumers",
    "tests": "tests",
    "benchmarks": "benchmarks",
}
SUFFIXES = {".py", ".pyi", ".typed"}


def mirror() -> dict[str, str]:
    """Refresh the mirror; return installed path -> repository path for every file."""
    origin: dict[str, str] = {}
    for source, target in LAYOUT.items():
        for path in sorted((REPO / source).rglob("*")):
            if path.suffix not in SUFFIXES or "__pycache__" in path.parts:
                continue
            relative = path.relative_to(REPO / source)
            installed = f"{target}/{relative.as_posix()}"
            origin[installed] = f"{source}/{relative.as_posix()}"
            copy = TREE / installed
            stat = path.stat()
            if copy.exists() and copy.stat().st_mtime_ns == stat.st_mtime_ns:
                continue
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copy)
    for stale in [p for p in TREE.rglob("*") if p.is_file() and p.suffix in SUFFIXES]:
        if stale.relative_to(TREE).as_posix() not in origin:
            stale.unlink()
    return origin


def main() -> int:
    """Mirror, run mypy in the mirror, map its paths back; mypy's exit code."""
    origin = mirror()
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(REPO / "pyproject.toml")],
        cwd=TREE,
        capture_output=True,
        text=True,
        check=False,
    )
    for line in (done.stdout + done.stderr).splitlines():
        path, sep, rest = line.partition(":")
        print(f"{origin.get(path, path)}{sep}{rest}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
