"""Standby replicas (`RESULTLOG_AGGREGATOR_STANDBY_REPLICAS`): warm copies of other instances'
partitions' stores, kept by tailing their changelog partitions (Kafka Streams'
`num.standby.replicas`), so that a failover hands a warm copy over instead of restoring.

Each copy is a store under this instance's state directory at the path an active store of its
partition uses (`store.partition_path`): when the partition is assigned here, the Restorer
asks the keeper to release it, and the normal open path finds a store whose changelog offset
is near the end and reads only the tail. `_placement` decides which partitions (a ring of the
group's members, following the group's assignment), `_copy` keeps one copy, `_keeper` runs
them on a thread of its own.
"""

from resultlog.consumers.aggregator.standby._keeper import StandbyKeeper
from resultlog.consumers.aggregator.standby._placement import (
    GroupView,
    describe_group,
    standby_partitions,
)

__all__ = ["GroupView", "StandbyKeeper", "describe_group", "standby_partitions"]
