"""`make install` prints no setuptools banner: only what a user could act on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.resultlog.test_wheel import REPO, _copy_of_the_tree
from tests.support.fault_table import FAULT_TIER

_RECIPE = re.compile(r'^\t(?:(\w+)="([^"]*)" )?\$\(BIN\)/pip install -q -e ', re.MULTILINE)


@pytest.mark.slow  # builds and installs the package in a fresh venv
@pytest.mark.timeout(900)
def test_the_editable_install_of_make_install_is_quiet(tmp_path: Path) -> None:
    recipe = _RECIPE.search((REPO / "Makefile").read_text())
    assert recipe is not None, "make install no longer runs pip install -q -e"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    if recipe[1]:
        env[recipe[1]] = recipe[2]
    source = _copy_of_the_tree(tmp_path / "source")
    # A venv of its own (pip would replace this interpreter's editable install otherwise),
    # with pip upgraded first as make install does: older pips hide the build's output.
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "env")], check=True, timeout=300)
    pip = str(tmp_path / "env" / "bin" / "pip")
    subprocess.run([pip, "install", "-q", "--upgrade", "pip"], check=True, timeout=300)

    def install(env: dict[str, str]) -> str:
        done = subprocess.run(
            [pip, "install", "-q", "--no-deps", "--force-reinstall", "-e", str(source)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    output = install(env)
    assert "Editable installation" not in output
    assert "is absent from the `packages` configuration" not in output
    # Without the Makefile's setting the banner shows: this test would see it.
    assert "Editable installation" in install({"PATH": env["PATH"], "HOME": env["HOME"]})


def test_the_fault_tier_of_the_makefile_is_the_one_its_table_waits_for() -> None:
    [tier] = re.findall(r"^FAULT_TIER := (.+)$", (REPO / "Makefile").read_text(), re.MULTILINE)
    assert tier == FAULT_TIER
