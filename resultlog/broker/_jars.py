"""Fetch Maven artifacts, such as the Apache Kafka jars, into a cache outside the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from resultlog.errors import BrokerError

__all__ = [
    "KAFKA_VERSION",
    "fetch_kafka_jars",
    "fetch_maven_artifacts",
    "jar_cache_dir",
    "require_executable",
    "user_cache_dir",
]

KAFKA_VERSION = "4.1.1"
# kafka_2.13 brings log4j-core and slf4j-api 1.7 but no slf4j binding, so the broker would
# log nothing; the log4j2 binding for slf4j 1.x routes it to log4j-core.
_LOG4J_VERSION = "2.24.3"
# Named in full: Maven then needs no plugin-prefix metadata, and every machine runs one version.
_COPY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"
_COMPLETE_MARKER = ".complete"
_COORDINATE_FIELDS = ("groupId", "artifactId", "version", "type", "classifier")
# Excluding every transitive dependency keeps Maven from resolving a tree it would not copy.
_NO_TRANSITIVES = (
    "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
)
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>resultlog</groupId><artifactId>fetch</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    {dependencies}
  </dependencies>
</project>
"""


def user_cache_dir() -> Path:
    """Where resultlog keeps what it downloads: $XDG_CACHE_HOME/resultlog, ~/.cache/resultlog."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "resultlog"


def jar_cache_dir() -> Path:
    """The folder holding the jars of the pinned Kafka version (outside the repository)."""
    root = os.environ.get("RESULTLOG_KAFKA_CACHE")
    base = Path(root) if root else user_cache_dir()
    return base / f"kafka-{KAFKA_VERSION}" / "libs"


def require_executable(name: str, purpose: str) -> str:
    """The path of an executable on PATH, or a BrokerError saying what is missing."""
    path = shutil.which(name)
    if path is None:
        raise BrokerError(f"{name} not found on PATH: {purpose}")
    return path


def fetch_kafka_jars() -> Path:
    """Download kafka_2.13 and its runtime dependencies once; return the jar folder."""
    kafka = f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}"
    log4j = f"org.apache.logging.log4j:log4j-slf4j-impl:{_LOG4J_VERSION}"
    return fetch_maven_artifacts([kafka, log4j], jar_cache_dir())


def fetch_maven_artifacts(
    coordinates: Sequence[str], directory: Path, *, transitive: bool = True
) -> Path:
    """Copy artifacts (group:artifact:version[:type[:classifier]]) into `directory` once.

    With `transitive`, their runtime dependencies too. Maven resolves them through the user's
    own set-up (settings.xml, mirrors, -Dmaven.repo.local in MAVEN_OPTS) and copies them out,
    so nothing depends on where the local Maven repository is. A complete `directory` is
    returned at once, without running Maven.
    """
    if (directory / _COMPLETE_MARKER).exists():
        return directory
    pom_text = _fetch_pom(coordinates, transitive=transitive)
    mvn = require_executable("mvn", f"Maven is needed once to fetch {', '.join(coordinates)}")
    directory.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory.parent, prefix=".fetch-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(pom_text)
        staged = Path(work) / "artifacts"
        command = [mvn, "-q", "-B", "-f", str(pom), f"{_COPY_PLUGIN}:copy-dependencies"]
        command += ["-DincludeScope=runtime", f"-DoutputDirectory={staged}"]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not staged.is_dir():
            last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            raise BrokerError(f"fetching {', '.join(coordinates)} with Maven failed: {last[0]}")
        (staged / _COMPLETE_MARKER).touch()
        if directory.exists():
            shutil.rmtree(directory)
        staged.rename(directory)
    return directory


def _fetch_pom(coordinates: Sequence[str], *, transitive: bool) -> str:
    """A throw-away POM whose dependencies are the artifacts to copy."""
    dependencies = [_dependency(coordinate, transitive=transitive) for coordinate in coordinates]
    return _POM.format(dependencies="\n    ".join(dependencies))


def _dependency(coordinate: str, *, transitive: bool) -> str:
    parts = coordinate.split(":")
    if not 3 <= len(parts) <= len(_COORDINATE_FIELDS):
        raise BrokerError(
            f"{coordinate!r} is not a Maven group:artifact:version[:type[:classifier]]"
        )
    fields = zip(_COORDINATE_FIELDS, parts, strict=False)
    xml = "".join(f"<{name}>{escape(value)}</{name}>" for name, value in fields)
    return f"<dependency>{xml}{'' if transitive else _NO_TRANSITIVES}</dependency>"
