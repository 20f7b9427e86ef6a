"""The aggregator's state store: each partition's per-key fold state on disk (RocksDB).

Memory keeps each run's totals and a bounded cache of hot keys; every contribution and
per-sample state lives in the partition's store under the state directory, with the offset
it covers and the exact log it came from (`_open` refuses any other), so a restart reads only
the tail. Each flush goes to the changelog topic first (`_changelog`), which restores a store
on another machine (`_restore`). `_codec` is the bytes (the store's and the changelog's), `_maps`
the mappings a RunFold keeps its state in.
"""

from resultlog.consumers.aggregator.store._changelog import (
    Changelog,
    ChangelogError,
    ChangelogRecord,
    Entries,
)
from resultlog.consumers.aggregator.store._codec import META as MARKER_KEY
from resultlog.consumers.aggregator.store._codec import StoreFormatError, changelog_messages
from resultlog.consumers.aggregator.store._open import (
    Opened,
    Refused,
    check_meta,
    destroy,
    open_store,
    partition_path,
)
from resultlog.consumers.aggregator.store._restore import restore_changelog
from resultlog.consumers.aggregator.store._store import LogIdentity, PartitionStore, StoreMeta

__all__ = [
    "MARKER_KEY",
    "Changelog",
    "ChangelogError",
    "ChangelogRecord",
    "Entries",
    "LogIdentity",
    "Opened",
    "PartitionStore",
    "Refused",
    "StoreFormatError",
    "StoreMeta",
    "changelog_messages",
    "check_meta",
    "destroy",
    "open_store",
    "partition_path",
    "restore_changelog",
]
