"""Maven artifacts land in our cache wherever the user's local Maven repository is."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from resultlog.broker import fetch_maven_artifacts
from resultlog.errors import BrokerError

SMALL = "org.slf4j:slf4j-api:1.7.36"  # one of the Kafka jars: 41 kB, no runtime dependencies
SMALL_IN_REPOSITORY = Path("org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar")
_LOCAL_REPOSITORY = re.compile(r"Using local repository at (.+)")
_EMPTY_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>t</groupId><artifactId>t</artifactId><version>1</version><packaging>pom</packaging>
</project>
"""


@pytest.fixture(scope="module")
def user_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The user's own local Maven repository, holding SMALL and everything a fetch runs."""
    work = tmp_path_factory.mktemp("user-maven")
    fetch_maven_artifacts([SMALL], work / "warm")  # free of downloads after the first time
    pom = work / "pom.xml"
    pom.write_text(_EMPTY_POM)
    done = subprocess.run(
        ["mvn", "-B", "-X", "-o", "-f", str(pom), "validate"],
        capture_output=True,
        text=True,
        check=True,
    )
    match = _LOCAL_REPOSITORY.search(done.stdout)
    assert match, "mvn -X no longer names its local repository"
    return Path(match[1])


def _settings_xml(home: Path, user_repository: Path) -> None:
    """A settings.xml under `home` that serves every artifact from the user's repository."""
    mirror = f"<id>user-repository</id><mirrorOf>*</mirrorOf><url>{user_repository.as_uri()}</url>"
    (home / ".m2").mkdir(parents=True)
    (home / ".m2" / "settings.xml").write_text(
        f"<settings><mirrors><mirror>{mirror}</mirror></mirrors></settings>"
    )


def test_fetch_copies_out_of_a_custom_local_repository_once(
    user_repository: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, custom = tmp_path / "home", tmp_path / "custom-repository"
    _settings_xml(home, user_repository)  # offline, and Maven's ~ holds no repository
    monkeypatch.setenv("MAVEN_OPTS", f"-Duser.home={home} -Dmaven.repo.local={custom}")
    cache = tmp_path / "cache" / "small"

    assert fetch_maven_artifacts([SMALL], cache) == cache

    assert sorted(p.name for p in cache.iterdir()) == [".complete", "slf4j-api-1.7.36.jar"]
    assert (custom / SMALL_IN_REPOSITORY).is_file()  # Maven resolved into the custom repository
    assert not (home / ".m2" / "repository").exists()
    monkeypatch.setenv("PATH", str(tmp_path / "no-maven-here"))
    assert fetch_maven_artifacts([SMALL], cache) == cache  # cached: Maven does not run again


def test_a_malformed_coordinate_is_a_clear_error(tmp_path: Path) -> None:
    message = "'org.slf4j' is not a Maven group:artifact:version[:type[:classifier]]"
    with pytest.raises(BrokerError, match=re.escape(message)):
        fetch_maven_artifacts(["org.slf4j"], tmp_path / "never")
    assert not (tmp_path / "never").exists()
