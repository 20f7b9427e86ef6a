"""resultlog's contract: record models, Kafka keys and partitions, and the Avro codec."""

from schemas._catalog import SchemaCatalog, SchemaVersion, shipped_catalog
from schemas._types import FORMAT_VERSION, SUPPORTED_FORMAT_VERSIONS
from schemas.codec import Codec, WireFormat
from schemas.errors import (
    DecodeError,
    KeyDecodeError,
    RegistryError,
    ResultLogError,
    SchemaError,
    UnknownFormatVersionError,
    UnknownSchemaError,
)
from schemas.keys import (
    decode_key,
    decode_run_key,
    encode_key,
    encode_run_key,
    partition_for,
    run_key_prefix,
)
from schemas.models import (
    Message,
    RecordError,
    RecordStatus,
    SampleResult,
    Score,
    ScoreValue,
    ToolCall,
    Usage,
    Worker,
)
from schemas.runkey import InvalidRunKeyError, RunKey
from schemas.summary import AsOf, RunSummary, SummaryUsage

__all__ = [
    "FORMAT_VERSION",
    "SUPPORTED_FORMAT_VERSIONS",
    "AsOf",
    "Codec",
    "DecodeError",
    "InvalidRunKeyError",
    "KeyDecodeError",
    "Message",
    "RecordError",
    "RecordStatus",
    "RegistryError",
    "ResultLogError",
    "RunKey",
    "RunSummary",
    "SampleResult",
    "SchemaCatalog",
    "SchemaError",
    "SchemaVersion",
    "Score",
    "ScoreValue",
    "SummaryUsage",
    "ToolCall",
    "UnknownFormatVersionError",
    "UnknownSchemaError",
    "Usage",
    "WireFormat",
    "Worker",
    "decode_key",
    "decode_run_key",
    "encode_key",
    "encode_run_key",
    "partition_for",
    "run_key_prefix",
    "shipped_catalog",
]
