"""The Apache Kafka jars of the broker: its shipped manifest and a cache outside the repository."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from resultlog.broker._maven import Artifact, fetch_artifacts, read_manifest

__all__ = [
    "KAFKA_VERSION",
    "fetch_kafka_jars",
    "jar_cache_dir",
    "kafka_manifest",
    "user_cache_dir",
]

KAFKA_VERSION = "4.1.1"
_MANIFEST = f"kafka-{KAFKA_VERSION}.jars"


def user_cache_dir() -> Path:
    """Where resultlog keeps what it downloads: $XDG_CACHE_HOME/resultlog, ~/.cache/resultlog."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "resultlog"


def jar_cache_dir() -> Path:
    """The folder holding the jars of the pinned Kafka version (outside the repository)."""
    root = os.environ.get("RESULTLOG_KAFKA_CACHE")
    base = Path(root) if root else user_cache_dir()
    return base / f"kafka-{KAFKA_VERSION}" / "libs"


def kafka_manifest() -> tuple[Artifact, ...]:
    """The broker's class path as shipped in the package: coordinates, SHA-256, sizes."""
    text = resources.files(__package__).joinpath(_MANIFEST).read_text(encoding="utf-8")
    return read_manifest(text, _MANIFEST)


def fetch_kafka_jars() -> Path:
    """The verified jar folder of the broker, downloaded the first time."""
    return fetch_artifacts(kafka_manifest(), jar_cache_dir(), what=f"Apache Kafka {KAFKA_VERSION}")
