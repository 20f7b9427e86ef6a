"""The aggregator's checkpoints: exact fold state per partition on a compacted topic.

`Checkpoints` restores a partition's latest complete checkpoint on assignment and writes new
ones every N records or T seconds on a thread of its own (`_write`); `_codec` is the record
format and `_read` the restore, which refuses, with one line, anything it cannot trust.
"""

from resultlog.consumers.aggregator.checkpoint._checkpoints import (
    Checkpoints,
    delete_retention_ms,
)
from resultlog.consumers.aggregator.checkpoint._read import Restored

__all__ = ["Checkpoints", "Restored", "delete_retention_ms"]
