"""The shipped Avro schema versions, parsed once and indexed by name and fingerprint."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from resultlog.schemas.errors import SchemaError

SAMPLE_RESULT = "resultlog.SampleResult"
RUN_SUMMARY = "resultlog.RunSummary"
CHUNK_TASK = "resultlog.ChunkTask"
AGGREGATOR_CHECKPOINT = "resultlog.AggregatorCheckpoint"  # the aggregator's own, not a model
RUN_INDEX = "resultlog.RunIndex"  # the aggregator's own, not a model
MODEL_VERSIONS: Mapping[str, int] = MappingProxyType(
    {SAMPLE_RESULT: 3, RUN_SUMMARY: 2, CHUNK_TASK: 2}
)
"""The schema version each pydantic model mirrors: the reader schema of the codec."""

_FILE_NAME = re.compile(r"(?P<stem>[a-z][a-z0-9_]*)\.v(?P<version>[1-9][0-9]*)\.avsc")


@dataclass(frozen=True, slots=True, eq=False)
class SchemaVersion:
    """One released version of one record schema, parsed and fingerprinted."""

    name: str
    version: int
    definition: Mapping[str, Any] = field(repr=False)
    parsed: dict[str, Any] = field(repr=False, compare=False)
    canonical: str = field(repr=False)
    fingerprint: bytes

    @property
    def text(self) -> str:
        """Compact JSON of the full definition (defaults and docs kept), as registered."""
        return json.dumps(self.definition, separators=(",", ":"))


def fingerprint64(canonical: str) -> bytes:
    """CRC-64-AVRO (Rabin) of a parsing canonical form, in wire (little-endian) byte order."""
    # fastavro hex-encodes the little-endian bytes, the order single-object encoding writes.
    return bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))


def build_version(definition: Mapping[str, Any], version: int) -> SchemaVersion:
    """Parse a schema definition once and fingerprint it."""
    try:
        parsed = fastavro.parse_schema(dict(definition))
        canonical = to_parsing_canonical_form(parsed)
    except Exception as exc:
        raise SchemaError(f"invalid Avro schema (version {version}): {exc}") from exc
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise SchemaError(f"schema version {version} is not a named record")
    name = parsed["name"]
    return SchemaVersion(name, version, definition, parsed, canonical, fingerprint64(canonical))


def load_file(path: Path) -> SchemaVersion:
    """Load one `<stem>.v<N>.avsc` file."""
    match = _FILE_NAME.fullmatch(path.name)
    if match is None:
        raise SchemaError(f"schema file {path.name!r} is not named <stem>.v<N>.avsc")
    try:
        definition = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SchemaError(f"cannot read schema file {path.name!r}: {exc}") from exc
    return build_version(definition, int(match["version"]))


class SchemaCatalog:
    """A set of schema versions, indexed by record name and version and by fingerprint."""

    def __init__(self, versions: Iterable[SchemaVersion]) -> None:
        self._by_name: dict[str, list[SchemaVersion]] = {}
        self._by_fingerprint: dict[bytes, SchemaVersion] = {}
        for item in versions:
            self._add(item)
        for items in self._by_name.values():
            items.sort(key=lambda v: v.version)

    def _add(self, item: SchemaVersion) -> None:
        """Index a version, refusing duplicates that would make lookups ambiguous."""
        same = self._by_name.setdefault(item.name, [])
        if any(v.version == item.version for v in same):
            raise SchemaError(f"{item.name} version {item.version} is defined twice")
        clash = self._by_fingerprint.get(item.fingerprint)
        if clash is not None:
            raise SchemaError(
                f"{item.name} v{item.version} has the fingerprint of v{clash.version}"
            )
        same.append(item)
        self._by_fingerprint[item.fingerprint] = item

    @classmethod
    def from_directory(cls, directory: Path) -> SchemaCatalog:
        """Load every `*.avsc` file of a directory."""
        return cls(load_file(p) for p in sorted(directory.glob("*.avsc")))

    def with_versions(self, extra: Iterable[SchemaVersion]) -> SchemaCatalog:
        """A new catalog holding these versions and the extra ones."""
        return SchemaCatalog([*self.all(), *extra])

    def all(self) -> list[SchemaVersion]:
        """Every version, grouped by name, oldest first."""
        return [v for items in self._by_name.values() for v in items]

    def versions(self, name: str) -> tuple[SchemaVersion, ...]:
        """Every version of one record name, oldest first."""
        return tuple(self._by_name.get(name, ()))

    def current(self, name: str) -> SchemaVersion:
        """The newest version of a record name: the one this code reads into."""
        items = self._by_name.get(name)
        if not items:
            raise SchemaError(f"no schema named {name}")
        return items[-1]

    def get(self, name: str, version: int) -> SchemaVersion:
        """One version of a record name."""
        for item in self._by_name.get(name, ()):
            if item.version == version:
                return item
        raise SchemaError(f"no schema {name} version {version}")

    def by_fingerprint(self, value: bytes) -> SchemaVersion | None:
        """The version with this CRC-64-AVRO fingerprint, if any."""
        return self._by_fingerprint.get(value)


def shipped_directory() -> Path:
    """Where the released `.avsc` files of this package live."""
    return Path(str(resources.files("resultlog.schemas") / "avro"))


@cache
def shipped_catalog() -> SchemaCatalog:
    """The released schema versions shipped with this package (parsed once per process)."""
    return SchemaCatalog.from_directory(shipped_directory())
