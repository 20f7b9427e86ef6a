"""resultlog's contract: record models, Kafka keys and partitions, and the Avro codec."""

from resultlog.schemas._catalog import SchemaCatalog, SchemaVersion, shipped_catalog
from resultlog.schemas._types import FORMAT_VERSION, SUPPORTED_FORMAT_VERSIONS
from resultlog.schemas.codec import Codec, WireFormat
from resultlog.schemas.errors import (
    DecodeError,
    KeyDecodeError,
    OutOfRangeError,
    RegistryError,
    ResultLogError,
    SchemaError,
    UnknownFormatVersionError,
    UnknownSchemaError,
)
from resultlog.schemas.keys import (
    RecordId,
    decode_key,
    decode_run_key,
    encode_key,
    encode_run_key,
    partition_for,
    run_key_prefix,
)
from resultlog.schemas.models import (
    Harness,
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
from resultlog.schemas.runkey import InvalidRunKeyError, RunKey
from resultlog.schemas.summary import AsOf, RunSummary, SummaryUsage

__all__ = [
    "FORMAT_VERSION",
    "SUPPORTED_FORMAT_VERSIONS",
    "AsOf",
    "Codec",
    "DecodeError",
    "Harness",
    "InvalidRunKeyError",
    "KeyDecodeError",
    "Message",
    "OutOfRangeError",
    "RecordError",
    "RecordId",
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
