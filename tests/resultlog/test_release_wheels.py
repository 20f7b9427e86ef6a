"""The release wheels' configuration: pyproject's [tool.cibuildwheel] and its workflow agree.

Neither runs here (cibuildwheel needs Docker and GitHub's runners; docs/contributing.md, "The
release wheels"), so this checks what can be checked without them: cibuildwheel pinned to one
release, the builds it selects (CPython 3.11 to 3.13 as requires-python allows, manylinux
x86_64 and aarch64, macOS x86_64 and arm64), each platform on a runner of its own, and the
test-command's probe, run against this checkout's install: it passes only where the fold runs
compiled.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # mkdocs' dependency; no stubs are installed
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from resultlog import _hotpath

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "wheels.yml"
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
CIBW: dict[str, Any] = PYPROJECT["tool"]["cibuildwheel"]
RELEASE = re.compile(r"v(\d+\.\d+\.\d+)")
# The identifiers cibuildwheel could build on its Linux and macOS runners, and their archs.
CANDIDATES = {
    f"{impl}3{minor}{threads}-{platform}_{arch}": arch
    for impl, threads in (("cp", ""), ("cp", "t"), ("pp", ""))
    for minor in range(8, 16)
    for platform, arch in (
        *((libc, arch) for libc in ("manylinux", "musllinux") for arch in ("x86_64", "aarch64")),
        ("manylinux", "i686"),
        *(("macosx", arch) for arch in ("x86_64", "arm64", "universal2")),
    )
}
EXPECTED = {
    f"cp{minor}-{platform}_{arch}"
    for minor in (311, 312, 313)
    for platform, archs in (("manylinux", ("x86_64", "aarch64")), ("macosx", ("x86_64", "arm64")))
    for arch in archs
}


def _workflow() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def _steps(job: str) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = _workflow()["jobs"][job]["steps"]
    return steps


def _selected(platform: str) -> set[str]:
    """The identifiers pyproject's build, skip and archs select for `platform` (cibuildwheel's
    rules: fnmatch patterns on the identifier, requires-python on its version)."""
    archs = set(CIBW[platform]["archs"])
    requires = SpecifierSet(PYPROJECT["project"]["requires-python"])
    selected = set()
    for identifier, arch in CANDIDATES.items():
        tag = identifier.split("-")[0]
        version = Version(f"3.{tag[3:].rstrip('t')}")
        if (
            ("macosx" in identifier) == (platform == "macos")
            and arch in archs
            and version in requires
            and any(fnmatch.fnmatch(identifier, p) for p in CIBW["build"])
            and not any(fnmatch.fnmatch(identifier, p) for p in CIBW["skip"])
        ):
            selected.add(identifier)
    return selected


def test_the_builds_are_cpython_3_11_to_3_13_on_manylinux_and_macos() -> None:
    # `cibuildwheel --print-build-identifiers --platform linux` (and macos) of the pinned
    # version prints these same twelve.
    assert _selected("linux") | _selected("macos") == EXPECTED


def test_the_built_pythons_are_requires_python_s_from_its_lowest_on() -> None:
    requires = SpecifierSet(PYPROJECT["project"]["requires-python"])
    selected = _selected("linux") | _selected("macos")
    built = sorted({int(identifier.split("-")[0][3:]) for identifier in selected})
    assert built == list(range(built[0], built[-1] + 1))  # no version left out in between
    assert all(Version(f"3.{minor}") in requires for minor in built)
    assert Version(f"3.{built[0] - 1}") not in requires  # the lowest it allows is built


def test_the_linux_wheels_use_the_pinned_manylinux_2_28_images() -> None:
    for arch in ("x86_64", "aarch64"):
        image = CIBW["linux"][f"manylinux-{arch}-image"]
        assert re.fullmatch(rf"quay\.io/pypa/manylinux_2_28_{arch}@sha256:[0-9a-f]{{64}}", image)


def test_cibuildwheel_is_pinned_to_one_release_whose_images_pyproject_names() -> None:
    uses = [step["uses"] for step in _steps("wheels") if "uses" in step]
    (action,) = [use for use in uses if use.startswith("pypa/cibuildwheel@")]
    pinned = RELEASE.fullmatch(action.partition("@")[2])
    assert pinned, action
    # The images' comment names the version whose pins they are: a bump changes both.
    said = re.findall(r"images cibuildwheel (\S+) pins", (REPO / "pyproject.toml").read_text())
    assert said == [pinned[1]]


def test_every_action_is_pinned_to_a_release_or_a_commit_of_one() -> None:
    lines = re.findall(r"^\s*(?:- )?uses: (\S+)(.*)$", WORKFLOW.read_text(), re.MULTILINE)
    assert len(lines) >= 6
    for action, rest in lines:
        ref = action.partition("@")[2]
        commit = re.fullmatch(r"[0-9a-f]{40}", ref) and RELEASE.search(rest)
        assert RELEASE.fullmatch(ref) or commit, action


def test_each_platform_builds_on_a_runner_of_its_own_with_qemu_for_aarch64() -> None:
    wheels = _workflow()["jobs"]["wheels"]
    runners = {(entry["os"], entry["archs"]) for entry in wheels["strategy"]["matrix"]["include"]}
    linux = {arch for os_, arch in runners if os_.startswith("ubuntu")}
    macos = {arch for os_, arch in runners if os_.startswith("macos")}
    assert linux == set(CIBW["linux"]["archs"])
    assert macos == set(CIBW["macos"]["archs"])
    assert len(runners) == len(linux) + len(macos)
    (build,) = [s for s in wheels["steps"] if s.get("uses", "").startswith("pypa/cibuildwheel@")]
    assert build["env"]["CIBW_ARCHS"] == "${{ matrix.archs }}"
    (qemu,) = [s for s in wheels["steps"] if s.get("uses", "").startswith("docker/setup-qemu")]
    assert qemu["if"] == "matrix.archs == 'aarch64'" and qemu["with"]["platforms"] == "arm64"
    uploads = [s for s in wheels["steps"] if s.get("uses", "").startswith("actions/upload-")]
    assert [s["with"]["path"] for s in uploads] == [f"{build['with']['output-dir']}/*.whl"]


def test_the_sdist_job_builds_and_uploads_the_sdist() -> None:
    steps = _steps("sdist")
    runs = "\n".join(step.get("run", "") for step in steps)
    assert re.search(r"^python -m build --sdist$", runs, re.MULTILINE), runs
    uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-")]
    assert [s["with"]["path"] for s in uploads] == ["dist/*.tar.gz"]


def test_the_builds_and_their_tests_never_ask_for_the_twins() -> None:
    assert CIBW["environment"] == {_hotpath.ENV: "0"}
    assert CIBW["test-environment"] == {_hotpath.ENV: "0"}


def _probe(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The test-command as cibuildwheel runs it: from a directory holding the test-sources."""
    for source in CIBW["test-sources"]:
        (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / source, tmp_path / source)
    python, _, script = CIBW["test-command"].partition(" ")
    assert python == "python"
    return subprocess.run(
        [sys.executable, script],
        cwd=tmp_path,
        env={**os.environ, **CIBW["test-environment"], **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_test_command_passes_where_the_fold_runs_compiled(tmp_path: Path) -> None:
    probed = _probe(tmp_path)
    if _hotpath._why_pure() is None:  # built and current, whatever this process runs
        assert probed.returncode == 0, probed.stderr
        assert "fold path compiled (mypyc)" in probed.stdout
        assert "one record folded compiled, accuracy 1.0" in probed.stdout
    else:
        assert probed.returncode == 1, probed.stdout
        assert "does not run its fold compiled" in probed.stderr


def test_the_test_command_fails_where_the_twins_run(tmp_path: Path) -> None:
    probed = _probe(tmp_path, **{_hotpath.ENV: "1"})
    assert probed.returncode == 1, probed.stdout
    assert probed.stderr.strip() == (
        f"resultlog: this install does not run its fold compiled (pure Python ({_hotpath.ENV}=1))"
    )
    assert "folded" not in probed.stdout
