"""Build resultlog, its fold's hot path compiled by mypyc where it can be (pyproject: the rest).

The modules of resultlog/_hotpath.py's HOT_MODULES become extension modules next to their
sources, with STAMP (the hash of those sources). Without a C compiler, with
RESULTLOG_PURE_PYTHON=1, or when compiling fails, the build goes on without them and says so
once: the pure-Python modules are the same code, and resultlog._hotpath runs them.
"""

from __future__ import annotations

import os
import runpy
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
HOTPATH = runpy.run_path(str(ROOT / "resultlog" / "_hotpath.py"))
HOT_MODULES: dict[str, str] = HOTPATH["HOT_MODULES"]
# The package folders in the installed layout (pyproject's package-dir): mypyc names modules
# by folder, so it compiles a copy laid out as installed.
LAYOUT = {
    "resultlog": "resultlog",
    "schemas": "resultlog/schemas",
    "producer": "resultlog/producer",
    "consumers": "resultlog/consumers",
}
# The extensions mypyc makes, by name (its group's shared library, then one per module): empty
# until build_ext runs, which fills them in (finalizing it, as listing an sdist's files does,
# must not run mypyc). They make the wheel platform-specific.
PLACEHOLDERS = [
    Extension(name, sources=[])
    for name in (HOTPATH["GROUP"] + "__mypyc", *HOT_MODULES, HOTPATH["STAMP"])
]


def _say(reason: str) -> None:
    print(
        f"resultlog: building without the compiled fold path ({reason}); "
        "the pure-Python modules will run",
        file=sys.stderr,
    )


def _no_compiler() -> str | None:
    """Why no extension can be compiled here (None: a C compiler and Python's headers work)."""
    from distutils.ccompiler import new_compiler
    from distutils.sysconfig import customize_compiler

    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp, "probe.c")
        probe.write_text("#include <Python.h>\nint main(void) { return 0; }\n")
        compiler: Any = new_compiler()
        customize_compiler(compiler)
        try:
            compiler.compile(
                [str(probe)], output_dir=tmp, include_dirs=[sysconfig.get_path("include")]
            )
        except Exception as exc:  # CompileError, a missing program: the same answer
            return f"no working C compiler: {exc}"
    return None


def _mirror(tree: Path) -> list[Path]:
    """Copy the package's sources to `tree` as installed, with the stamp; the paths to compile."""
    shutil.rmtree(tree, ignore_errors=True)
    for folder, installed in LAYOUT.items():
        shutil.copytree(
            ROOT / folder, tree / installed, ignore=shutil.ignore_patterns("__pycache__", "*.so")
        )
    sources = [ROOT / path for path in HOT_MODULES.values()]
    stamp = tree / (HOTPATH["STAMP"].replace(".", "/") + ".py")
    stamp.write_text(
        '"""The hash of the sources the compiled fold path was built from."""\n\n'
        f'SOURCES = "{HOTPATH["sources_hash"](sources)}"\n'
    )
    return [tree / name.replace(".", "/") for name in (*HOT_MODULES, HOTPATH["STAMP"])]


def _extensions(build: Path) -> list[Extension]:
    """mypyc's extensions of the hot modules (it type-checks them as it goes)."""
    from mypyc.build import mypycify

    paths = [f"{path}.py" for path in _mirror(build / "tree")]
    here = Path.cwd()
    os.chdir(build / "tree")  # mypy would also find the repository's resultlog/ from ROOT
    try:
        extensions: list[Extension] = mypycify(
            [
                "--config-file",
                str(ROOT / "pyproject.toml"),
                # Third-party packages are not installed in an isolated build: Any for them,
                # so what flows from them is Any too (make lint checks it with real types).
                "--ignore-missing-imports",
                "--no-warn-return-any",
                "--allow-subclassing-any",
                "--allow-untyped-decorators",
                # An ignore that only the real third-party types need is unused here.
                "--no-warn-unused-ignores",
                "--follow-imports=silent",
                *paths,
            ],
            opt_level="3",
            target_dir=str(build / "c"),
            group_name=HOTPATH["GROUP"],
        )
    finally:
        os.chdir(here)
    return extensions


class BuildHotPath(build_ext):
    """build_ext of the compiled fold path: it builds it, or nothing and says why once."""

    def run(self) -> None:
        if not self.extensions:
            return
        reason = _no_compiler()
        if reason is None:
            try:
                built = {ext.name: ext for ext in _extensions(ROOT / "build" / "mypyc")}
                for ext in self.extensions:
                    vars(ext).update(
                        (k, v) for k, v in vars(built[ext.name]).items() if k[0] != "_"
                    )
                super().run()
                return
            except (Exception, SystemExit) as exc:  # mypy's errors exit; a compiler's raise
                reason = f"compiling failed: {exc}"
        _say(reason)
        self.extensions = []


# RESULTLOG_PURE_PYTHON=1 at build time: nothing to compile, a pure wheel.
PURE = os.environ.get(HOTPATH["ENV"], "") not in ("", "0")
setup(ext_modules=[] if PURE else PLACEHOLDERS, cmdclass={"build_ext": BuildHotPath})
