"""A Maven repository served over real HTTP on loopback, laid out from files the test chose."""

from __future__ import annotations

import functools
import hashlib
import shutil
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from resultlog.broker import Artifact

__all__ = ["artifact_of", "closed_port_url", "lay_out", "serve_repository"]


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Requests are not test output."""


def artifact_of(coordinate: str, content: bytes) -> Artifact:
    """An artifact whose pinned hash and size are those of `content`."""
    group, artifact, version, *tail = coordinate.split(":")
    extension, classifier = (tail + ["jar", ""][len(tail) :])[:2]
    sha256 = hashlib.sha256(content).hexdigest()
    return Artifact(group, artifact, version, extension, classifier, sha256, len(content))


def lay_out(root: Path, files: Iterable[tuple[Artifact, bytes | Path]]) -> Path:
    """Write each file where a Maven repository under `root` keeps it."""
    for artifact, content in files:
        target = root / artifact.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, target)
        else:
            target.write_bytes(content)
    return root


@contextmanager
def serve_repository(root: Path) -> Iterator[str]:
    """Serve `root` over HTTP on 127.0.0.1 (an OS-chosen port); yield its URL."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def closed_port_url() -> str:
    """A URL on loopback where nothing listens."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _QuietHandler)
    port = server.server_address[1]
    server.server_close()
    return f"http://127.0.0.1:{port}"
