"""One file, one module: schemas/, producer/ and consumers/ load only as resultlog.*, and
import no layer above their own."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAPPED = {"resultlog.schemas": "schemas", "resultlog.producer": "producer"}
MAPPED["resultlog.consumers"] = "consumers"

# Imports every module of the package, then tries each mapped folder's files under their bare
# names (what an IDE's auto-import or the repository root on sys.path would offer), and prints
# which bare names loaded and every file that sys.modules holds under two names.
PROBE = """
import importlib, json, pkgutil, sys
refused, loaded = [], []
for top in ("resultlog", "resultlog.schemas", "resultlog.producer", "resultlog.consumers"):
    package = importlib.import_module(top)
    for info in pkgutil.walk_packages(package.__path__, top + "."):
        if info.name.endswith("__main__"):
            continue  # runs the command line
        importlib.import_module(info.name)
for name in ("schemas", "schemas.codec", "producer", "producer.runner", "consumers",
             "consumers.fold", "consumers.aggregator"):
    try:
        importlib.import_module(name)
        loaded.append(name)
    except ImportError as exc:
        refused.append(str(exc))
files = {}
for name, module in list(sys.modules.items()):
    path = getattr(module, "__file__", None)
    if path:
        files.setdefault(path, []).append(name)
twice = {path: names for path, names in files.items() if len(names) > 1}
print(json.dumps({"refused": refused, "loaded": loaded, "twice": twice}))
"""


@pytest.mark.parametrize("cwd", [REPO, REPO / "tests"], ids=["repo-root", "tests"])
def test_no_file_loads_under_two_names(cwd: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO)!r})\n{PROBE}"],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    seen = json.loads(done.stdout)
    # Installed packages are not ours, even in a .venv inside the checkout: pandas registers
    # one of its compiled modules under two names itself.
    ours = {
        path: names
        for path, names in seen["twice"].items()
        if path.startswith(str(REPO)) and "site-packages" not in Path(path).parts
    }
    assert ours == {}
    assert seen["loaded"] == []
    assert all("import resultlog." in line for line in seen["refused"]), seen["refused"]


def test_the_mapped_folders_are_the_resultlog_sub_packages() -> None:
    import resultlog.consumers
    import resultlog.producer
    import resultlog.schemas

    for module in (resultlog.schemas, resultlog.producer, resultlog.consumers):
        folder = Path(module.__file__ or "").parent
        assert folder == REPO / MAPPED[module.__name__]


def test_pyproject_lists_every_package_folder() -> None:
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"resultlog": "resultlog", **MAPPED}
    found = set()
    for package, folder in setuptools["package-dir"].items():
        for init in (REPO / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((package, *relative)))
    assert set(setuptools["packages"]) == found


def test_the_repository_holds_no_symbolic_links() -> None:
    staged = subprocess.run(
        ["git", "ls-files", "--stage"], cwd=REPO, capture_output=True, text=True, check=True
    )
    links = [
        line.split("\t")[1] for line in staged.stdout.splitlines() if line.startswith("120000")
    ]
    assert links == []


# Dependencies point one way: schemas <- the core (errors, settings, the Kafka boundary, topics,
# ACLs, the broker launcher) <- consumers <- producer <- cli. resultlog.analysis reads through the
# consumers' readers and never loads the aggregator service (its web server and RocksDB).
_ABOVE_CORE = (
    "resultlog.consumers",
    "resultlog.producer",
    "resultlog.lm_eval",
    "resultlog.analysis",
    "resultlog.cli",
)
_CORE: tuple[str, ...] = ("resultlog.errors", "resultlog.settings", "resultlog.kafka")
_CORE += ("resultlog.topics", "resultlog.acl", "resultlog.broker", "resultlog._diagnose")
_CORE += ("resultlog._pem",)
_SERVICE = "resultlog.consumers.aggregator"
LAYERS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "schemas": (["schemas"], _CORE + _ABOVE_CORE),
    "core": (["resultlog/*.py", "resultlog/broker"], _ABOVE_CORE),
    "consumers": (["consumers"], _ABOVE_CORE[1:]),
    "producer": (["producer"], ("resultlog.analysis", "resultlog.cli")),
    "analysis": (
        ["resultlog/analysis"],
        ("resultlog.cli", "resultlog.producer", "resultlog.lm_eval", _SERVICE),
    ),
}
_FACADES = {"resultlog/lm_eval.py"}  # resultlog.lm_eval re-exports the producer's lm-eval entry


def _layer_files(patterns: list[str]) -> list[Path]:
    """The Python files of a layer: folders whole, globs as they match."""
    found: set[Path] = set()
    for pattern in patterns:
        path = REPO / pattern
        found.update(path.rglob("*.py") if path.is_dir() else REPO.glob(pattern))
    return sorted(p for p in found if str(p.relative_to(REPO)) not in _FACADES)


def _imported(path: Path) -> set[str]:
    """Every module the file imports, at its top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_a_layer_imports_no_layer_above_it(layer: str) -> None:
    patterns, above = LAYERS[layer]
    files = _layer_files(patterns)
    assert files, f"the layer {layer} has no files: {patterns}"
    upward = [
        f"{path.relative_to(REPO)}: {name}"
        for path in files
        for name in sorted(_imported(path))
        if name.startswith(above)
    ]
    assert upward == []


# Wide calls take an options object (or a value that groups what belongs together).
_MAX_PARAMETERS = 10


def _parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """How many parameters a caller may pass (self and cls aside; *args and **kwargs count)."""
    a = function.args
    named = [*a.posonlyargs, *a.args]
    if named and named[0].arg in ("self", "cls"):
        named = named[1:]
    return len(named) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)


def test_no_function_takes_more_than_ten_parameters() -> None:
    wide = set()
    for folder in ("schemas", "consumers", "producer", "resultlog"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                if _parameters(node) > _MAX_PARAMETERS:
                    wide.add(f"{path.relative_to(REPO)}: {node.name}")
    assert not wide, sorted(wide)
