"""Fetch the Apache Kafka jars from Maven Central into a cache outside the repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from resultlog.errors import BrokerError

__all__ = ["KAFKA_VERSION", "fetch_kafka_jars", "jar_cache_dir", "require_executable"]

KAFKA_VERSION = "4.1.1"
# kafka_2.13 brings log4j-core and slf4j-api 1.7 but no slf4j binding, so the broker would
# log nothing; the log4j2 binding for slf4j 1.x routes it to log4j-core.
_LOG4J_VERSION = "2.24.3"
_COMPLETE_MARKER = ".complete"

_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>resultlog</groupId><artifactId>kafka-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>
      <version>{kafka}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId>
      <version>{log4j}</version>
    </dependency>
  </dependencies>
</project>
"""


def jar_cache_dir() -> Path:
    """The folder holding the jars of the pinned Kafka version (outside the repository)."""
    root = os.environ.get("RESULTLOG_KAFKA_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "resultlog"
    return base / f"kafka-{KAFKA_VERSION}" / "libs"


def require_executable(name: str, purpose: str) -> str:
    """The path of an executable on PATH, or a BrokerError saying what is missing."""
    path = shutil.which(name)
    if path is None:
        raise BrokerError(f"{name} not found on PATH: {purpose}")
    return path


def fetch_kafka_jars() -> Path:
    """Download kafka_2.13 and its runtime dependencies once; return the jar folder."""
    libs = jar_cache_dir()
    if (libs / _COMPLETE_MARKER).exists():
        return libs
    mvn = require_executable("mvn", "Maven is needed once to fetch the Kafka jars")
    libs.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=libs.parent) as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(_POM.format(kafka=KAFKA_VERSION, log4j=_LOG4J_VERSION))
        staged = Path(work) / "libs"
        command = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staged}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not staged.is_dir():
            last = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
            raise BrokerError(
                f"downloading Kafka {KAFKA_VERSION} from Maven Central failed: {last[0]}"
            )
        (staged / _COMPLETE_MARKER).touch()
        if libs.exists():
            shutil.rmtree(libs)
        staged.rename(libs)
    return libs
