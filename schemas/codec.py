"""Avro codec: records to bytes and back, in single-object or Confluent registry framing."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from io import BytesIO
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, cast

from fastavro import schemaless_reader, schemaless_writer
from fastavro.read import SchemaResolutionError
from pydantic import ValidationError

from resultlog.schemas._catalog import (
    CHUNK_TASK,
    MODEL_VERSIONS,
    RUN_SUMMARY,
    SAMPLE_RESULT,
    SchemaCatalog,
    SchemaVersion,
    shipped_catalog,
)
from resultlog.schemas._limits import SUPPORTED_FORMAT_VERSIONS
from resultlog.schemas._prefix import FoldPrefix, read_prefix
from resultlog.schemas._registry import Registry, SchemaNotFoundError
from resultlog.schemas._types import TRUSTED_JSON
from resultlog.schemas._view import FoldView, ViewPlans, millis_error
from resultlog.schemas.chunk_task import ChunkTask
from resultlog.schemas.errors import (
    DecodeError,
    Location,
    OutOfRangeError,
    RegistryNotConfiguredError,
    SchemaError,
    UnknownFormatVersionError,
    UnknownSchemaError,
)
from resultlog.schemas.models import SampleResult
from resultlog.schemas.summary import RunSummary

if TYPE_CHECKING:
    from confluent_kafka.schema_registry import SchemaRegistryClient

_SHIPPED_V2 = shipped_catalog().get(SAMPLE_RESULT, 2)
_SHIPPED_V3 = shipped_catalog().get(SAMPLE_RESULT, 3)
SINGLE_OBJECT_MAGIC = b"\xc3\x01"
REGISTRY_MAGIC = 0
_SINGLE_OBJECT_HEADER = 10
_REGISTRY_HEADER = 5

ModelT = TypeVar("ModelT", SampleResult, RunSummary, ChunkTask)
_Raw = bytes | bytearray | memoryview | None  # a Kafka value as a decode method takes it
_NOWHERE = Location()
# pydantic error types that mean "a number outside its bounds" (docs/design.md, rule 9).
_BOUND_ERRORS = frozenset(
    {"greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"}
)


class WireFormat(StrEnum):
    """How a value is framed on the wire."""

    SINGLE_OBJECT = "single-object"
    REGISTRY = "registry"


def _label(version: SchemaVersion) -> str:
    """How error messages name a schema version."""
    origin = "from the registry" if version.version == 0 else f"v{version.version}"
    return f"{version.name} {origin} ({version.fingerprint.hex()})"


def _as_bytes(raw: _Raw, where: Location) -> bytes:
    """Normalise a Kafka value to bytes, rejecting empty ones."""
    if type(raw) is bytes and raw:
        return raw
    if raw is None:
        raise DecodeError("empty value (tombstone or null)", None, where)
    if not isinstance(raw, bytes):
        if not isinstance(raw, bytearray | memoryview):
            reason = f"value must be bytes, got {type(raw).__name__}"
            raise DecodeError(reason, None, where)
        raw = bytes(raw)
    if not raw:
        raise DecodeError("empty value (0 bytes)", raw, where)
    return raw


def _one_line(errors: list[Any]) -> str:
    """A pydantic error report on one line: `field: message (input)` per error."""
    parts = []
    for error in errors[:5]:
        where = ".".join(str(part) for part in error["loc"]) or "record"
        parts.append(f"{where}: {error['msg']} (got {str(error.get('input'))[:60]})")
    more = f"; and {len(errors) - 5} more" if len(errors) > 5 else ""
    return "; ".join(parts) + more


class _RecordCodec(Generic[ModelT]):
    """Encoding and decoding of one record type against its current reader schema."""

    def __init__(self, catalog: SchemaCatalog, name: str, model: type[ModelT]) -> None:
        self.name = name
        self.model: type[ModelT] = model
        self.reader = catalog.get(name, MODEL_VERSIONS[name])
        self.header = SINGLE_OBJECT_MAGIC + self.reader.fingerprint
        # model_validate minus its Python wrapper: same validation, one call less per record.
        self._validate = model.__pydantic_validator__.validate_python
        self._catalog = catalog
        # The schemas the hand-written prefix reader reads (fingerprints name them exactly),
        # each with whether it is v3; only while the reader is v3, which it reads them into.
        self._hand_read: dict[bytes, bool] = {}
        if name == SAMPLE_RESULT and self.reader.fingerprint == _SHIPPED_V3.fingerprint:
            self._hand_read = {_SHIPPED_V2.fingerprint: False, _SHIPPED_V3.fingerprint: True}
        # The same, by the whole single-object header of a value (magic and fingerprint).
        self.hand_read_headers: dict[bytes, bool] = {
            SINGLE_OBJECT_MAGIC + fingerprint: v3 for fingerprint, v3 in self._hand_read.items()
        }

    def encode(self, record: ModelT, registry: Registry | None, topic: str | None) -> bytes:
        """Frame and serialize a validated record."""
        if not isinstance(record, self.model):
            raise TypeError(f"expected {self.model.__name__}, got {type(record).__name__}")
        buf = BytesIO()
        buf.write(self.header if registry is None else self._registry_header(registry, topic))
        try:
            schemaless_writer(buf, self.reader.parsed, record.model_dump())
        except Exception as exc:
            raise SchemaError(f"cannot encode {self.name}: {exc}") from exc
        return buf.getvalue()

    def _registry_header(self, registry: Registry, topic: str | None) -> bytes:
        """Magic byte 0 and the big-endian schema id registered for the topic."""
        if not topic:
            raise SchemaError("registry framing needs the topic (subject <topic>-value)")
        schema_id = registry.schema_id(topic, self.reader)
        return bytes((REGISTRY_MAGIC,)) + schema_id.to_bytes(4, "big")

    def decode(self, raw: bytes, registry: Registry | None, where: Location) -> ModelT:
        """Unframe, read into the reader schema, check the version, validate the contract."""
        writer, start = self._writer_of(raw, registry, where)
        reader = None if writer is self.reader else self.reader.parsed
        datum, end = self._read(raw, start, (writer.parsed, reader), writer, where)
        if end != len(raw):
            reason = f"{len(raw) - end} trailing bytes after the Avro body"
            raise DecodeError(reason, raw, where)
        return cast(ModelT, self.validate(self._validate, datum, raw, where))

    def hand_prefix(
        self, raw: bytes, registry: Registry | None, where: Location
    ) -> FoldPrefix | None:
        """The fold prefix of a v2 or v3 value in either framing, read by hand (not checked);
        None for another writer, or bytes the hand reader leaves to fastavro."""
        writer, start = self._writer_of(raw, registry, where)
        v3 = self._hand_read.get(writer.fingerprint)
        return None if v3 is None else read_prefix(raw, start, v3)

    def read_view(
        self, raw: bytes, registry: Registry | None, where: Location, plans: ViewPlans
    ) -> dict[str, Any]:
        """Unframe and read, with fastavro, only the leading fields `plans` cut the writer to."""
        writer, start = self._writer_of(raw, registry, where)
        return self._read(raw, start, plans.plan(writer), writer, where)[0]

    def validate(
        self, validate: Callable[..., object], datum: dict[str, Any], raw: bytes, where: Location
    ) -> object:
        """Check the format version, then validate the datum; failures are located."""
        version = datum.get("format_version")
        if version not in SUPPORTED_FORMAT_VERSIONS:
            known = ", ".join(map(str, sorted(SUPPORTED_FORMAT_VERSIONS)))
            reason = f"unknown format_version {version!r} (this reader knows {known})"
            raise UnknownFormatVersionError(reason, raw, where)
        try:
            return validate(datum, context=TRUSTED_JSON)
        except ValidationError as exc:
            errors = exc.errors()
            out_of_range = all(error["type"] in _BOUND_ERRORS for error in errors)
            reason = f"{self.name} violates the contract: {_one_line(errors)}"
            kind = OutOfRangeError if out_of_range else DecodeError
            raise kind(reason, raw, where) from exc

    def _writer_of(
        self, raw: bytes, registry: Registry | None, where: Location
    ) -> tuple[SchemaVersion, int]:
        """The writer schema of a value and where its body starts."""
        if raw[:_SINGLE_OBJECT_HEADER] == self.header:  # the hot path: our own current schema
            return self.reader, _SINGLE_OBJECT_HEADER
        return self._writer(raw, registry, where)

    def _writer(
        self, raw: bytes, registry: Registry | None, where: Location
    ) -> tuple[SchemaVersion, int]:
        """The writer schema named by the frame header, and where the body starts."""
        if raw.startswith(SINGLE_OBJECT_MAGIC):
            return self._by_fingerprint(raw, where), _SINGLE_OBJECT_HEADER
        if raw[0] == REGISTRY_MAGIC:
            return self._by_schema_id(raw, registry, where), _REGISTRY_HEADER
        reason = f"unrecognised framing: first byte 0x{raw[0]:02x} (expected 0xc3 0x01 or 0x00)"
        raise DecodeError(reason, raw, where)

    def _by_fingerprint(self, raw: bytes, where: Location) -> SchemaVersion:
        """Find a single-object writer schema among the shipped versions."""
        if len(raw) < _SINGLE_OBJECT_HEADER:
            reason = f"truncated single-object header ({len(raw)} of 10 bytes)"
            raise DecodeError(reason, raw, where)
        fingerprint = raw[2:_SINGLE_OBJECT_HEADER]
        writer = self._catalog.by_fingerprint(fingerprint)
        if writer is None:
            reason = f"unknown schema fingerprint {fingerprint.hex()} (not a shipped version)"
            raise UnknownSchemaError(reason, raw, where)
        return self._check_name(writer, f"fingerprint {fingerprint.hex()}", raw, where)

    def _by_schema_id(
        self, raw: bytes, registry: Registry | None, where: Location
    ) -> SchemaVersion:
        """Find a registry-framed writer schema by id."""
        if len(raw) < _REGISTRY_HEADER:
            reason = f"truncated registry header ({len(raw)} of 5 bytes)"
            raise DecodeError(reason, raw, where)
        schema_id = int.from_bytes(raw[1:_REGISTRY_HEADER], "big")
        if registry is None:
            reason = f"registry-framed value (schema id {schema_id}) but no registry is configured"
            if not self._is_registry_framed_record(raw):
                raise UnknownSchemaError(reason, raw, where)
            # One of our records, written with a registry: the reader is misconfigured.
            reason += "; set RESULTLOG_SCHEMA_REGISTRY_URL to the registry its writers use"
            raise RegistryNotConfiguredError(reason, raw, where)
        try:
            writer = registry.writer(schema_id)
        except SchemaNotFoundError as exc:
            raise UnknownSchemaError(str(exc), raw, where) from exc
        writer = self._catalog.by_fingerprint(writer.fingerprint) or writer
        return self._check_name(writer, f"schema id {schema_id}", raw, where)

    def _is_registry_framed_record(self, raw: bytes) -> bool:
        """Whether the body after a registry header is a whole record of a shipped version
        (random bytes starting with 0x00 almost never are: they stay poison)."""
        for version in reversed(self._catalog.versions(self.name)):
            buf = BytesIO(raw)
            buf.seek(_REGISTRY_HEADER)
            try:
                datum = schemaless_reader(buf, version.parsed, None)
            except Exception:  # not this version's body; try the next
                continue
            if buf.tell() == len(raw) and isinstance(datum, dict):
                return datum.get("format_version") in SUPPORTED_FORMAT_VERSIONS
        return False

    def _check_name(
        self, writer: SchemaVersion, label: str, raw: bytes, where: Location
    ) -> SchemaVersion:
        """Refuse bytes of another record type (e.g. a RunSummary read as a SampleResult)."""
        if writer.name != self.name:
            reason = f"{label} is a {writer.name} schema, expected {self.name}"
            raise UnknownSchemaError(reason, raw, where)
        return writer

    def _read(
        self,
        raw: bytes,
        start: int,
        schemas: tuple[dict[str, Any], dict[str, Any] | None],
        writer: SchemaVersion,
        where: Location,
    ) -> tuple[dict[str, Any], int]:
        """Read an Avro body with (writer, reader) schemas, resolving another version's; the
        datum and where it ended."""
        buf = BytesIO(raw)
        buf.seek(start)
        try:
            datum = schemaless_reader(buf, *schemas)
        except SchemaResolutionError as exc:
            reason = (
                f"writer schema {_label(writer)} cannot be read as {_label(self.reader)}: {exc}"
            )
            raise UnknownSchemaError(reason, raw, where) from exc
        except Exception as exc:
            reason = f"malformed Avro body: {type(exc).__name__}: {exc}"
            raise DecodeError(reason, raw, where) from exc
        if not isinstance(datum, dict):
            raise DecodeError("Avro body is not a record", raw, where)
        return datum, buf.tell()


class Codec:
    """Encodes and decodes SampleResult, RunSummary and ChunkTask values.

    Without a registry, values are written in Avro single-object encoding; with one, in the
    Confluent framing (magic 0, schema id). Decoding recognises both framings either way.
    """

    def __init__(
        self,
        registry_url: str | None = None,
        registry_config: Mapping[str, Any] | None = None,
        *,
        registry_client: SchemaRegistryClient | None = None,
        catalog: SchemaCatalog | None = None,
    ) -> None:
        catalog = catalog or shipped_catalog()
        self._registry: Registry | None = None
        self._owns_client = False
        if registry_client is not None:
            self._registry = Registry(registry_client)
        elif registry_url:
            self._registry = Registry.from_url(registry_url, registry_config)
            self._owns_client = True
        self._samples = _RecordCodec(catalog, SAMPLE_RESULT, SampleResult)
        self._summaries = _RecordCodec(catalog, RUN_SUMMARY, RunSummary)
        self._tasks = _RecordCodec(catalog, CHUNK_TASK, ChunkTask)
        self._views = ViewPlans(self._samples.reader)
        self._validate_view = FoldView.__pydantic_validator__.validate_python

    def close(self) -> None:
        """Close the registry client if this codec created it (a passed-in one is the caller's)."""
        if self._registry is not None and self._owns_client:
            self._registry.client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def wire_format(self) -> WireFormat:
        """The framing this codec writes."""
        return WireFormat.SINGLE_OBJECT if self._registry is None else WireFormat.REGISTRY

    def encode_sample_result(self, record: SampleResult, topic: str | None = None) -> bytes:
        """Serialize a record; `topic` names the registry subject and is required with one."""
        return self._samples.encode(record, self._registry, topic)

    def decode_sample_result(self, raw: _Raw, *, at: Location | None = None) -> SampleResult:
        """Deserialize and validate a record; any failure is a DecodeError carrying the bytes."""
        where = at or _NOWHERE
        return self._samples.decode(_as_bytes(raw, where), self._registry, where)

    def decode_fold_view(self, raw: _Raw, *, at: Location | None = None) -> FoldView:
        """Deserialize and validate only the fields the fold reads (see FoldView): the bytes
        after them are not read. Failures are the DecodeErrors `decode_sample_result` raises."""
        where = at or _NOWHERE
        raw = _as_bytes(raw, where)
        datum = self._view_datum(raw, where)
        return cast(FoldView, self._samples.validate(self._validate_view, datum, raw, where))

    @property
    def hand_read_headers(self) -> Mapping[bytes, bool]:
        """The single-object headers (magic and fingerprint) of the writer schemas whose fold
        prefix the hand reader reads, each with whether it is v3 (else v2)."""
        return self._samples.hand_read_headers

    def fold_prefix(self, raw: _Raw, *, at: Location | None = None) -> FoldPrefix | None:
        """The fold prefix of a v2 or v3 value, read by hand and not yet checked
        (`FoldPrefix.acceptable`); None when `decode_fold_view` must decide (another writer,
        bytes the hand reader leaves to fastavro). Framing errors are `decode_fold_view`'s."""
        where = at or _NOWHERE
        return self._samples.hand_prefix(_as_bytes(raw, where), self._registry, where)

    def _view_datum(self, raw: bytes, where: Location) -> dict[str, Any]:
        """The fold prefix of a value, its `created_at` checked to be a datetime's milliseconds."""
        datum = self._samples.read_view(raw, self._registry, where, self._views)
        reason = millis_error(datum)
        if reason is not None:
            raise DecodeError(f"malformed Avro body: {reason}", raw, where)
        return datum

    def encode_run_summary(self, summary: RunSummary, topic: str | None = None) -> bytes:
        """Serialize a summary; `topic` names the registry subject and is required with one."""
        return self._summaries.encode(summary, self._registry, topic)

    def decode_run_summary(self, raw: _Raw, *, at: Location | None = None) -> RunSummary:
        """Deserialize and validate a summary; any failure is a DecodeError carrying the bytes."""
        where = at or _NOWHERE
        return self._summaries.decode(_as_bytes(raw, where), self._registry, where)

    def encode_chunk_task(self, task: ChunkTask, topic: str | None = None) -> bytes:
        """Serialize a chunk task; `topic` names the registry subject and is required with one."""
        return self._tasks.encode(task, self._registry, topic)

    def decode_chunk_task(self, raw: _Raw, *, at: Location | None = None) -> ChunkTask:
        """Deserialize and validate a task; any failure is a DecodeError carrying the bytes."""
        where = at or _NOWHERE
        return self._tasks.decode(_as_bytes(raw, where), self._registry, where)
