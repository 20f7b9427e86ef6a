"""The numbers of the contract: its format version and the bounds of every number it holds.

Plain constants, apart from the pydantic types built on them (`_types`): a command line that
checks an argument against a bound loads nothing else.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "FIRST_MS",
    "FORMAT_VERSION",
    "LAST_MS",
    "MAX_COST_USD",
    "MAX_HTTP_STATUS",
    "MAX_INDEX",
    "MAX_METRIC",
    "MAX_MILLIS",
    "MAX_RECORDS_SUMMED",
    "MAX_TOKENS",
    "MIN_HTTP_STATUS",
    "SUPPORTED_FORMAT_VERSIONS",
]

FORMAT_VERSION: Final = 1
"""The record semantics version this code writes and the only one it reads."""

SUPPORTED_FORMAT_VERSIONS: Final = frozenset({FORMAT_VERSION})

# Design rule 9 (docs/design.md): every number a reader sums is bounded so that its sum over 2^31
# records still fits an Avro long (2^31 x 2^32 = 2^63) or a double with room to spare.
# Refused when a record is built; dead-lettered as out_of_range when a reader meets one.
MAX_RECORDS_SUMMED: Final = 2**31
MAX_INDEX: Final = 2**31 - 1
MAX_TOKENS: Final = 2**32 - 1
MAX_MILLIS: Final = 2**32 - 1
MAX_COST_USD: Final = 1e6
MAX_METRIC: Final = 1e12
MIN_HTTP_STATUS: Final = 100
MAX_HTTP_STATUS: Final = 599
# The instants a datetime holds (year 1 to 9999), in milliseconds since the epoch: outside
# them a reader's timestamp-millis read of created_at fails.
FIRST_MS: Final = -62_135_596_800_000
LAST_MS: Final = 253_402_300_799_999
