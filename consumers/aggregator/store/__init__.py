"""The aggregator's state: each partition's per-key fold state on disk (RocksDB), its
changelog, and how a saved store is trusted, restored and opened.

Memory keeps each run's totals and a bounded cache of hot keys; every contribution and
per-sample state lives in the partition's store under the state directory (`_store`), with
the offset it covers and the exact log it came from (`_meta`). Each flush goes to the
changelog topic first (`_changelog`: its one writer and reader; `_records`: what a flush
writes). Whether a saved store may be used is decided in one place (`_trust`, over `_open`'s
checks); `_restore` applies a changelog to a store; `_opener` and `_restorer` bring an
assigned partition's store up on a thread of its own. `_codec` is the bytes (the store's and
the changelog's), `_maps` the mappings a RunFold keeps its state in.
"""

from resultlog.consumers.aggregator.store._changelog import KafkaChangelog
from resultlog.consumers.aggregator.store._codec import META as MARKER_KEY
from resultlog.consumers.aggregator.store._codec import StoreFormatError, changelog_messages
from resultlog.consumers.aggregator.store._files import ASIDE, MOVED_ASIDE
from resultlog.consumers.aggregator.store._meta import (
    GENERATION_KEY,
    FlushPhase,
    LogIdentity,
    StoreMeta,
)
from resultlog.consumers.aggregator.store._open import (
    Opened,
    Refused,
    check_meta,
    destroy,
    open_store,
    partition_path,
)
from resultlog.consumers.aggregator.store._opener import Cancelled, Progress, StoreOpener
from resultlog.consumers.aggregator.store._records import (
    Changelog,
    ChangelogError,
    ChangelogRecord,
    Entries,
)
from resultlog.consumers.aggregator.store._restore import restore_changelog
from resultlog.consumers.aggregator.store._restorer import Restore, Restorer, Standby
from resultlog.consumers.aggregator.store._store import PartitionStore
from resultlog.consumers.aggregator.store._trust import StoreSpace, Trusted, trust

__all__ = [
    "ASIDE",
    "GENERATION_KEY",
    "MARKER_KEY",
    "MOVED_ASIDE",
    "Cancelled",
    "Changelog",
    "ChangelogError",
    "ChangelogRecord",
    "Entries",
    "FlushPhase",
    "KafkaChangelog",
    "LogIdentity",
    "Opened",
    "PartitionStore",
    "Progress",
    "Refused",
    "Restore",
    "Restorer",
    "Standby",
    "StoreFormatError",
    "StoreMeta",
    "StoreOpener",
    "StoreSpace",
    "Trusted",
    "changelog_messages",
    "check_meta",
    "destroy",
    "open_store",
    "partition_path",
    "restore_changelog",
    "trust",
]
