"""Start a real Confluent-compatible schema registry (Apicurio Registry 3, in-memory) for tests.

The distribution is the `all` tar.gz that Apicurio publishes on Maven Central next to
`io.apicurio:apicurio-registry-app`; it is copied once out of Maven, wherever the local Maven
repository is, and unpacked under the user cache. Apicurio 3 needs Java 21 or newer.
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

from resultlog.broker import fetch_maven_artifacts, user_cache_dir

VERSION = "3.3.3"
ARTIFACT = f"io.apicurio:apicurio-registry-app:{VERSION}:tar.gz:all"
_TARBALL = f"apicurio-registry-app-{VERSION}-all.tar.gz"
_LISTENING = re.compile(r"Listening on: http://127\.0\.0\.1:(\d+)")
_JAVA_VERSION = re.compile(r'version "(\d+)')
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
        fetched = fetch_maven_artifacts([ARTIFACT], Path(download) / "maven", transitive=False)
        staging = Path(tempfile.mkdtemp(dir=home.parent, prefix=".unpack-"))
        with tarfile.open(fetched / _TARBALL) as archive:
            archive.extractall(staging, filter="data")
    try:
        staging.rename(home)
    except OSError:  # another process unpacked it first
        shutil.rmtree(staging, ignore_errors=True)
    return home


def _java_major(java: str) -> int:
    """The major version of a java binary, 0 if it does not run."""
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return 0
    match = _JAVA_VERSION.search(done.stderr + done.stdout)
    return int(match[1]) if match else 0


def find_java() -> str:
    """A java binary of version 21 or newer."""
    candidates = [os.environ.get("RESULTLOG_APICURIO_JAVA", "")]
    if os.environ.get("JAVA_HOME"):
        candidates.append(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    candidates += sorted(str(p) for p in Path("/usr/lib/jvm").glob("*/bin/java"))
    candidates.append(shutil.which("java") or "")
    for java in filter(None, candidates):
        if _java_major(java) >= _MIN_JAVA:
            return java
    raise RuntimeError(f"Apicurio Registry {VERSION} needs Java {_MIN_JAVA}+; none found")


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
    home, java = distribution(), find_java()
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
