"""`make install` prints no setuptools banner: only what a user could act on."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.resultlog.test_wheel import REPO, _copy_of_the_tree

_RECIPE = re.compile(r'^\t(?:(\w+)="([^"]*)" )?\$\(BIN\)/pip install -q -e ', re.MULTILINE)


@pytest.mark.timeout(900)
def test_the_editable_install_of_make_install_is_quiet(tmp_path: Path) -> None:
    recipe = _RECIPE.search((REPO / "Makefile").read_text())
    assert recipe is not None, "make install no longer runs pip install -q -e"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    if recipe[1]:
        env[recipe[1]] = recipe[2]
    source = _copy_of_the_tree(tmp_path / "source")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps"]
    done = subprocess.run(
        [*pip, "--prefix", str(tmp_path / "prefix"), "-e", str(source)],
        env=env,
        capture_output=True,
        text=True,
        timeout=800,
    )
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert "Editable installation" not in output
    assert "is absent from the `packages` configuration" not in output
