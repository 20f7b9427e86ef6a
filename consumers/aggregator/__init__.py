"""The aggregator service: folds the results topic into run summaries, publishes and serves them.

Crash safety: state is rebuilt from the compacted log, never from committed offsets. On every
partition assignment the aggregator resumes the partition's state store (its exact fold
state and the offset it covers: `store`), brought up to date from the compacted changelog
topic every flush writes first (`_changelog`; from the start on a new machine), and reads the
tail, or, without usable state, seeks the partition to its beginning and re-folds it; on
revocation it publishes what is pending for the partition, flushes its store, then drops its
run keys and stops serving them. All records of a run key live in one partition
(records found elsewhere are dead-lettered as misrouted, since resume and replay never see
them), so per-partition state is self-contained: a SIGKILL at any moment followed by a
restart, or a rebalance between instances of one group, converges to what replay computes.
Nothing is committed: offsets would name a resume point this design never uses; lag is
exported on /healthz and /metrics instead. Assignment uses cooperative-sticky, so a rebalance
only re-folds partitions that actually moved; its callbacks receive only the delta. With
standby replicas (`standby`) an instance keeps warm copies of other instances' partitions'
stores, tailed from their changelog, which a failover hands over instead of restoring.

A partition is caught up once it has been read up to the high watermark seen when it was
assigned (or to its end); until then its runs are neither published nor served, so a rebuild
never publishes a partial summary. Once caught up, every run of the partition is published
(the previous owner may have died before publishing), then only runs that changed, at most
every `publish_interval_s`. A record whose key is fine but whose value cannot be decoded
leaves its key without a record, exactly as replay does; it never stops the service.

Threads: the consumer loop runs in its own thread and is the only writer of the state, always
under one lock. HTTP threads read under that lock but do not fold: a reader of a run that changed
asks the consumer thread for its summary and waits on a condition; the consumer thread computes
it between batches, outside the lock (no other thread changes a fold), so a slow summary never
starves ingestion, concurrent readers share one computation, and the answer still includes every
record applied before the request. If the consumer thread is busy past a bound (a rebalance) or
stopped, the reader computes under the lock itself.

Others write the summaries topic too (`replay --publish`): the aggregator reads the summaries
partitions it owns and corrects stale, phantom or deleted summaries once caught up
(`_reconcile`). It stops with a one-line error when a topic no longer matches the settings
(checked every few seconds and on every rebalance), and never dead-letters a record because
the schema registry was away: it reads it again. The HTTP server (`web._http`) bounds what slow or
hostile clients can hold.

Dead letters are written once per instance (offsets already read by this instance are not
dead-lettered again when a partition is rebuilt), but another instance or a restart will
write them again: DLQ delivery is at-least-once.
"""

from resultlog.consumers.aggregator._health import Health
from resultlog.consumers.aggregator._service import Aggregator
from resultlog.consumers.aggregator._state import Lookup, RunFilter, RunsPage, RunsQuery
from resultlog.consumers.aggregator.web import (
    BadRequestError,
    HttpServer,
    create_app,
    run_key_from_path,
)

__all__ = [
    "Aggregator",
    "BadRequestError",
    "Health",
    "HttpServer",
    "Lookup",
    "RunFilter",
    "RunsPage",
    "RunsQuery",
    "create_app",
    "run_key_from_path",
]
