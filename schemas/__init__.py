"""resultlog's contract: record models, Kafka keys and partitions, and the Avro codec."""

# This folder is installed as resultlog.schemas (pyproject's package-dir); loading it under
# another name (the repository root on sys.path) would load every module a second time.
if __name__ != "resultlog.schemas":
    raise ImportError(
        f"import resultlog.schemas, not {__name__} (the folder schemas/ is resultlog.schemas)"
    )

from typing import TYPE_CHECKING

from resultlog._lazy import lazy_exports

# Each name is imported where it is first used (resultlog._lazy): these imports say from where.
if TYPE_CHECKING:
    from resultlog.schemas._catalog import SchemaCatalog, SchemaVersion, shipped_catalog
    from resultlog.schemas._limits import (
        FORMAT_VERSION,
        MAX_COST_USD,
        MAX_INDEX,
        MAX_METRIC,
        MAX_MILLIS,
        MAX_TOKENS,
        SUPPORTED_FORMAT_VERSIONS,
    )
    from resultlog.schemas._prefix import FoldPrefix
    from resultlog.schemas._types import TRUSTED_JSON
    from resultlog.schemas._view import FoldView
    from resultlog.schemas.chunk_task import ChunkTask, task_key
    from resultlog.schemas.codec import Codec, WireFormat
    from resultlog.schemas.errors import (
        ConfigurationError,
        DecodeError,
        KeyDecodeError,
        Location,
        OutOfRangeError,
        RegistryError,
        RegistryNotConfiguredError,
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
        indexes_part,
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
        WriterProcess,
    )
    from resultlog.schemas.runkey import InvalidRunKeyError, RunKey, check_run_key_part
    from resultlog.schemas.summary import AsOf, RunSummary, SummaryUsage

__all__ = [
    "FORMAT_VERSION",
    "MAX_COST_USD",
    "MAX_INDEX",
    "MAX_METRIC",
    "MAX_MILLIS",
    "MAX_TOKENS",
    "SUPPORTED_FORMAT_VERSIONS",
    "TRUSTED_JSON",
    "AsOf",
    "ChunkTask",
    "Codec",
    "ConfigurationError",
    "DecodeError",
    "FoldPrefix",
    "FoldView",
    "Harness",
    "InvalidRunKeyError",
    "KeyDecodeError",
    "Location",
    "Message",
    "OutOfRangeError",
    "RecordError",
    "RecordId",
    "RecordStatus",
    "RegistryError",
    "RegistryNotConfiguredError",
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
    "WriterProcess",
    "check_run_key_part",
    "decode_key",
    "decode_run_key",
    "encode_key",
    "encode_run_key",
    "indexes_part",
    "partition_for",
    "run_key_prefix",
    "shipped_catalog",
    "task_key",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
