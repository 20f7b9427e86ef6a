"""The fold path: compiled by mypyc where it is built, else its pure-Python twin; same results.

The suite's own run uses whichever path this install has; the twin's run of the fold's
property tests (prefix reader vs fastavro, field check vs pydantic, fold vs the Fraction
re-fold, one-pass ingest and resume's one-pass views vs the full path, golden vectors) is a
child pytest with RESULTLOG_PURE_PYTHON=1.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import resultlog
from resultlog import _hotpath

REPO = Path(__file__).resolve().parents[2]
PROPERTY_TESTS = (
    "tests/schemas/test_fold_prefix.py",
    "tests/schemas/test_fold_check.py",
    "tests/schemas/test_fold_view.py",
    "tests/schemas/test_conformance.py",
    "tests/consumers/test_fold.py",
    "tests/consumers/test_fold_view.py",
    "tests/consumers/test_ingest.py",
    "tests/consumers/test_run_views.py",
    "tests/consumers/test_state_store.py",
)
PROBE = """
import importlib, json, resultlog
from resultlog._hotpath import HOT_MODULES
files = {name: importlib.import_module(name).__file__ for name in HOT_MODULES}
print(json.dumps({"path": resultlog.fold_path(), "files": files}))
"""


def _probe(**env: str) -> dict[str, object]:
    """What a fresh interpreter runs: the fold path it says, and each hot module's file."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    probed: dict[str, object] = json.loads(done.stdout)
    return probed


def _built() -> bool:
    return importlib.util.find_spec(_hotpath.STAMP) is not None


def test_the_compiled_path_runs_wherever_it_is_built() -> None:
    probed = _probe(**{_hotpath.ENV: ""})
    files = probed["files"]
    assert isinstance(files, dict) and set(files) == set(_hotpath.HOT_MODULES)
    if _built():
        assert probed["path"] == "compiled (mypyc)"
        assert all(not str(path).endswith(".py") for path in files.values()), files
    else:
        assert str(probed["path"]).startswith("pure Python (the compiled fold path is not built")
        assert all(str(path).endswith(".py") for path in files.values()), files


def test_pure_python_forces_the_twins() -> None:
    probed = _probe(**{_hotpath.ENV: "1"})
    assert probed["path"] == "pure Python (RESULTLOG_PURE_PYTHON=1)"
    files = probed["files"]
    assert isinstance(files, dict)
    assert all(str(path).endswith(".py") for path in files.values()), files


def test_this_run_says_which_path_it_runs() -> None:
    expected = _built() and os.environ.get(_hotpath.ENV, "") in ("", "0")
    assert _hotpath.compiled() is expected
    assert resultlog.fold_path().startswith("compiled" if expected else "pure Python")


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_fold_property_tests_pass_on_the_twins() -> None:
    if not _hotpath.compiled():
        pytest.skip(f"this run is the twins' already: {resultlog.fold_path()}")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *PROPERTY_TESTS],
        cwd=REPO,
        env={**os.environ, _hotpath.ENV: "1"},
        capture_output=True,
        text=True,
        timeout=1100,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "fold path: pure Python (RESULTLOG_PURE_PYTHON=1)" in done.stdout


def _chooser_saying(
    reason: str | None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> list[str]:
    """The INFO lines of a fresh chooser asked three times, `_why_pure` answering `reason`."""
    monkeypatch.delenv(_hotpath.ENV, raising=False)
    monkeypatch.setattr(_hotpath, "_why_pure", lambda: reason)
    chooser = _hotpath._Chooser()
    with caplog.at_level(logging.INFO, logger=_hotpath.__name__):
        answers = {chooser.decide() for _ in range(3)}
    assert answers == {reason is None}
    return [r.getMessage() for r in caplog.records if r.name == _hotpath.__name__]


def test_a_missing_or_broken_extension_is_said_in_one_info_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lines = _chooser_saying("the compiled fold path is not built", monkeypatch, caplog)
    assert lines == ["running the pure-Python fold path: the compiled fold path is not built"]
    caplog.clear()
    assert _chooser_saying(None, monkeypatch, caplog) == []


def test_the_reasons_for_the_twins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_hotpath, "STAMP", "resultlog_no_such_stamp")
    assert _hotpath._why_pure() == "the compiled fold path is not built (make install builds it)"
    # An extension module that cannot be loaded: not a shared object at all.
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    (tmp_path / f"resultlog_broken_stamp{suffix}").write_bytes(b"not an ELF file")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(_hotpath, "STAMP", "resultlog_broken_stamp")
    why = _hotpath._why_pure()
    assert why is not None and why.startswith("the compiled fold path cannot be loaded: ")
    # A stamp of other sources: a build older than the checkout.
    (tmp_path / "resultlog_old_stamp.py").write_text('SOURCES = "0"\n')
    monkeypatch.setattr(_hotpath, "STAMP", "resultlog_old_stamp")
    monkeypatch.setattr(_hotpath, "_extension", lambda source: True)
    assert _hotpath._why_pure() == (
        "the compiled fold path was built from other sources (make install rebuilds it)"
    )
    monkeypatch.setattr(_hotpath, "_extension", lambda source: False)
    assert _hotpath._why_pure() == "a module of the compiled fold path is missing"


def test_make_install_rebuilds_when_a_compiled_module_changes() -> None:
    database = subprocess.run(
        ["make", "--print-data-base", "--dry-run", "help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    [listed] = re.findall(r"^HOT_SOURCES := (.*)$", database, re.MULTILINE)
    sources = set(listed.split())
    assert sources == {"setup.py", "resultlog/_hotpath.py", *_hotpath.HOT_MODULES.values()}
    for name, source in _hotpath.HOT_MODULES.items():
        assert (REPO / source).is_file(), name
        assert importlib.import_module(name).__name__ == name
