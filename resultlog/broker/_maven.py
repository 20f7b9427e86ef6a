"""Maven artifacts pinned by SHA-256 in a manifest: downloaded over HTTP, verified, cached.

No Maven runs here: a manifest (written by scripts/jar_manifest.py from Maven's resolution)
lists each file's coordinate, SHA-256 and size; the files come from Maven Central, or from
the mirror RESULTLOG_MAVEN_REPOSITORY names, into a folder that appears whole or not at all.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from resultlog.errors import BrokerError

if TYPE_CHECKING:  # imported by a download only: the jars are mostly cached
    import httpx
    from rich.progress import Progress, TaskID

__all__ = [
    "MAVEN_CENTRAL",
    "Artifact",
    "fetch_artifacts",
    "format_manifest",
    "maven_repository",
    "read_manifest",
]

MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"
# Written last into a complete folder: the digest of the manifest it holds.
_COMPLETE = ".complete"
_CHUNK = 1 << 16
_TIMEOUT_S, _CONNECT_TIMEOUT_S = 60.0, 15.0
_SHA256_HEX = 64


@dataclass(frozen=True)
class Artifact:
    """One file of a Maven repository and what it must hash to."""

    group: str
    artifact: str
    version: str
    extension: str = "jar"
    classifier: str = ""
    sha256: str = ""
    size: int = 0

    @property
    def coordinate(self) -> str:
        """group:artifact:version[:type[:classifier]], as `mvn dependency:get` takes it."""
        tail = [self.extension, self.classifier] if self.classifier else [self.extension]
        if tail == ["jar"]:
            tail = []
        return ":".join([self.group, self.artifact, self.version, *tail])

    @property
    def file_name(self) -> str:
        classifier = f"-{self.classifier}" if self.classifier else ""
        return f"{self.artifact}-{self.version}{classifier}.{self.extension}"

    @property
    def path(self) -> str:
        """Where the file lives in a Maven repository."""
        group = self.group.replace(".", "/")
        return f"{group}/{self.artifact}/{self.version}/{self.file_name}"


def read_manifest(text: str, source: str) -> tuple[Artifact, ...]:
    """The artifacts of a manifest: `coordinate sha256 size` a line, `#` comments."""
    artifacts = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 3 or len(fields[1]) != _SHA256_HEX or not fields[2].isdecimal():
            raise BrokerError(f"{source}:{number}: not `coordinate sha256 size`: {line!r}")
        artifacts.append(_parse(fields[0], fields[1], int(fields[2]), f"{source}:{number}"))
    return tuple(artifacts)


def _parse(coordinate: str, sha256: str, size: int, where: str) -> Artifact:
    parts = coordinate.split(":")
    if not 3 <= len(parts) <= 5 or not all(parts):
        raise BrokerError(f"{where}: {coordinate!r} is not group:artifact:version[:type[:cls]]")
    group, artifact, version, *tail = parts
    extension, classifier = (tail + ["jar", ""][len(tail) :])[:2]
    return Artifact(group, artifact, version, extension, classifier, sha256.lower(), size)


def format_manifest(artifacts: Iterable[Artifact], header: Sequence[str]) -> str:
    """The text `read_manifest` reads back: the header as comments, then one line a file."""
    lines = [f"# {line}" for line in header]
    lines += [f"{a.coordinate} {a.sha256} {a.size}" for a in artifacts]
    return "\n".join(lines) + "\n"


def maven_repository() -> str:
    """The repository to download from: RESULTLOG_MAVEN_REPOSITORY, else Maven Central."""
    return (os.environ.get("RESULTLOG_MAVEN_REPOSITORY") or MAVEN_CENTRAL).rstrip("/")


def _digest(artifacts: Sequence[Artifact]) -> str:
    lines = sorted(f"{a.path} {a.sha256}" for a in artifacts)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _is_complete(directory: Path, digest: str) -> bool:
    try:
        return (directory / _COMPLETE).read_text().strip() == digest
    except OSError:
        return False


def fetch_artifacts(artifacts: Sequence[Artifact], directory: Path, *, what: str) -> Path:
    """`directory` holding every artifact, verified; downloaded first unless already there.

    Files are staged beside `directory` and moved in whole, so an interrupted or failed
    download leaves nothing half-written. Files of an older folder whose hash still matches
    are kept, not downloaded again.
    """
    digest = _digest(artifacts)
    if _is_complete(directory, digest):
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory.parent, prefix=f".{directory.name}-") as work:
        staged = Path(work) / directory.name
        staged.mkdir()
        missing = [a for a in artifacts if not _reuse(directory / a.file_name, a, staged)]
        if missing:
            _download(missing, staged, what)
        (staged / _COMPLETE).write_text(digest + "\n")
        if _is_complete(directory, digest):  # another process finished first
            return directory
        if directory.exists():
            directory.rename(Path(work) / "replaced")
        staged.rename(directory)
    return directory


def _reuse(old: Path, artifact: Artifact, staged: Path) -> bool:
    """Copy an already cached file into the staging folder when its hash matches."""
    if not old.is_file() or old.stat().st_size != artifact.size:
        return False
    if _sha256_of(old) != artifact.sha256:
        return False
    shutil.copy2(old, staged / artifact.file_name)
    return True


def _sha256_of(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(_CHUNK):
            sha.update(chunk)
    return sha.hexdigest()


def _download(artifacts: Sequence[Artifact], staged: Path, what: str) -> None:
    """Download each artifact into `staged`, showing one progress bar; verify each hash."""
    import httpx
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    repository = maven_repository()
    total = sum(a.size for a in artifacts)
    label = f"downloading {what} ({len(artifacts)} files) from {_shown(repository)}"
    console = Console(stderr=True)
    if not console.is_terminal:  # a log gets one line instead of a bar
        print(f"resultlog: {label}, {total / 1e6:.1f} MB, once", file=sys.stderr, flush=True)
    columns = (BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    progress = Progress(
        TextColumn("{task.description}"),
        *columns,
        console=console,
        disable=not console.is_terminal,
    )
    timeout = httpx.Timeout(_TIMEOUT_S, connect=_CONNECT_TIMEOUT_S)
    with progress, httpx.Client(timeout=timeout, follow_redirects=True) as client:
        task = progress.add_task(label, total=total)
        for artifact in artifacts:
            url = f"{repository}/{artifact.path}"
            got = _download_one(client, url, staged / artifact.file_name, progress, task)
            if got != artifact.sha256:
                raise BrokerError(
                    f"{_shown(url)} does not match its pinned SHA-256 ({got[:16]}... instead "
                    f"of {artifact.sha256[:16]}...); nothing was cached: check "
                    "RESULTLOG_MAVEN_REPOSITORY or the network"
                )


def _download_one(
    client: httpx.Client, url: str, target: Path, progress: Progress, task: TaskID
) -> str:
    """Stream `url` into `target`; its SHA-256."""
    import httpx

    if url.startswith("file://"):
        return _copy_local(url, target, progress, task)
    sha = hashlib.sha256()
    try:
        with client.stream("GET", url) as response, target.open("wb") as file:
            if response.status_code != httpx.codes.OK:
                raise BrokerError(
                    f"cannot download {_shown(url)}: HTTP {response.status_code}; is "
                    "RESULTLOG_MAVEN_REPOSITORY a Maven repository?"
                )
            for chunk in response.iter_bytes(_CHUNK):
                sha.update(chunk)
                file.write(chunk)
                progress.advance(task, len(chunk))
    except httpx.HTTPError as exc:
        reason = str(exc) or type(exc).__name__
        raise BrokerError(
            f"cannot download {_shown(url)}: {reason}; check the network, or name a "
            "reachable mirror in RESULTLOG_MAVEN_REPOSITORY"
        ) from exc
    return sha.hexdigest()


def _copy_local(url: str, target: Path, progress: Progress, task: TaskID) -> str:
    """Copy a file of a local repository (a file:// mirror, such as ~/.m2/repository)."""
    source = Path(urlsplit(url).path)
    try:
        shutil.copyfile(source, target)
    except OSError as exc:
        raise BrokerError(f"cannot copy {source}: {exc.strerror or exc}") from exc
    progress.advance(task, target.stat().st_size)
    return _sha256_of(target)


def _shown(url: str) -> str:
    """A URL without its user and password, fit for a message."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
