"""Every error resultlog raises on purpose, in one tree rooted at `ResultLogError`.

Catch `ResultLogError` for all of them, or a layer's root for one layer's. A class with a
second base (a builtin one, or `ConfigurationError`) is caught by that too.

```text
ResultLogError                      the root (resultlog, resultlog.schemas)
├── ConfigurationError              settings contradict the topics: stop (resultlog.schemas)
├── SchemaError                     the contract (resultlog.schemas)
│   ├── RegistryError               the schema registry failed a request (retryable)
│   ├── SchemaNotFoundError         the registry has no such schema (also LookupError)
│   ├── InvalidRunKeyError          a run key part is refused (also ValueError)
│   └── DecodeError                 bytes that are no record (dead-lettered)
│       ├── KeyDecodeError
│       ├── UnknownFormatVersionError
│       ├── OutOfRangeError
│       └── UnknownSchemaError
│           └── RegistryNotConfiguredError  (also ConfigurationError)
├── ConsumerError                   the reading side (resultlog.consumers)
│   ├── UnusableIndexError          the run index cannot speak for a partition
│   ├── IndexRecordError            (also ValueError)
│   ├── StoreFormatError            (also ValueError)
│   ├── ChangelogError              the aggregator's changelog cannot be written or read
│   ├── Cancelled                   a restore of a partition no longer assigned stops
│   ├── Released                    a warm standby copy was handed over mid-read (a signal)
│   ├── BadRequestError             the HTTP API answers 400 (also ValueError)
│   └── NotServedError              the HTTP API answers 404 or 503
├── ProducerError                   the writers: worker, leases, purge, spend (resultlog.producer)
│   ├── PersistenceError
│   │   └── TopicRecreatedError     the results topic was re-created under a writer
│   ├── ModelError
│   ├── SolverError
│   ├── BenchmarkError
│   ├── UnansweredError
│   ├── ConfigChangedError
│   ├── LeaseError
│   │   ├── LeaseHeldError
│   │   └── LeaseLostError
│   ├── LeaseTakenOverError
│   ├── PurgeError
│   │   └── PurgeLeasedError
│   ├── SpendLedgerError
│   ├── WorkError
│   ├── RescoreError
│   │   └── SourceBusyError         the source run's writer still holds its lease
│   ├── InspectPluginError
│   │   └── ImportConflictError     an imported pair differs from its durable record
│   └── LmEvalError
│       └── LmEvalBudgetError
├── AnalysisError                   resultlog.analysis
├── KafkaClientError                the Kafka boundary (resultlog.kafka)
│   └── TopicLayoutError            (also ConfigurationError)
├── PemError                        a TLS file a setting names (also ValueError)
└── CliError                        the command line
    ├── BrokerError
    └── TopicError
```
"""

from __future__ import annotations

from resultlog.schemas.errors import ConfigurationError, ResultLogError

__all__ = [
    "BrokerError",
    "CliError",
    "ConfigurationError",
    "KafkaClientError",
    "ResultLogError",
    "TopicError",
    "TopicLayoutError",
]


class CliError(ResultLogError):
    """A command-line invocation that cannot be carried out."""


class BrokerError(CliError):
    """The local Kafka broker could not be fetched, started or stopped."""


class TopicError(CliError):
    """A topic could not be created or contradicts the settings."""


class KafkaClientError(ResultLogError):
    """Kafka refused or could not serve a client (unreachable, missing topic, refused login)."""


class TopicLayoutError(KafkaClientError, ConfigurationError):
    """A topic's partition count or cleanup policy contradicts the settings: refuse to use it."""
