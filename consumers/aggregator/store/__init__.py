"""The aggregator's state store: each partition's per-key fold state on disk (RocksDB).

Memory keeps each run's totals and a bounded cache of hot keys; every contribution and
per-sample state lives in the partition's store under the state directory, with the offset
it covers and the exact log it came from (`_open` refuses any other), so a restart reads only
the tail. `_codec` is the bytes, `_maps` the mappings a RunFold keeps its state in.
"""

from resultlog.consumers.aggregator.store._codec import StoreFormatError
from resultlog.consumers.aggregator.store._open import Opened, Refused, open_store, partition_path
from resultlog.consumers.aggregator.store._store import LogIdentity, PartitionStore, StoreMeta

__all__ = [
    "LogIdentity",
    "Opened",
    "PartitionStore",
    "Refused",
    "StoreFormatError",
    "StoreMeta",
    "open_store",
    "partition_path",
]
