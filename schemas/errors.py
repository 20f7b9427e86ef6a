"""The root of every error resultlog raises on purpose, and the contract's errors.

`resultlog.errors` draws the whole tree.
"""

from __future__ import annotations

from typing import NamedTuple


class ResultLogError(Exception):
    """Root of every error resultlog raises on purpose."""


class ConfigurationError(ResultLogError):
    """The settings contradict what the topics hold: stop, never evaluate or publish again."""


class SchemaError(ResultLogError):
    """A record or schema violates the contract."""


class RegistryError(SchemaError):
    """The schema registry could not be reached or refused a request (retryable, not poison)."""


class Location(NamedTuple):
    """Where bytes were read from (topic, partition, offset), as far as the reader knows."""

    topic: str | None = None
    partition: int | None = None
    offset: int | None = None

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


class DecodeError(SchemaError):
    """Bytes read from Kafka could not be decoded into a record."""

    _subject = "record"

    def __init__(self, reason: str, raw: bytes | None, at: Location | None = None) -> None:
        self.reason = reason
        self.raw = raw
        self.location = at if at is not None else Location()
        super().__init__(self._describe())

    @property
    def topic(self) -> str | None:
        """The topic the bytes came from, if known."""
        return self.location.topic

    @property
    def partition(self) -> int | None:
        """Their partition, if known."""
        return self.location.partition

    @property
    def offset(self) -> int | None:
        """Their offset, if known."""
        return self.location.offset

    def _describe(self) -> str:
        where = "" if self.topic is None else f" at {self.location}"
        size = "no value" if self.raw is None else f"{len(self.raw)} bytes"
        return f"cannot decode {self._subject}{where} ({size}): {self.reason}"

    def at(self, location: Location) -> DecodeError:
        """A copy of this error (same class and cause) naming where the bytes came from."""
        located = type(self)(self.reason, self.raw, location)
        located.__cause__ = self.__cause__
        return located


class KeyDecodeError(DecodeError):
    """A Kafka record key is not a well-formed resultlog key."""

    _subject = "key"


class UnknownFormatVersionError(DecodeError):
    """A record carries a format_version this reader does not know; it is never guessed at."""


class UnknownSchemaError(DecodeError):
    """A value names a writer schema (fingerprint or registry id) this reader cannot find."""


class OutOfRangeError(DecodeError):
    """A record decodes but a number in it is outside the contract's bounds (design rule 9)."""


class RegistryNotConfiguredError(UnknownSchemaError, ConfigurationError):
    """A record in registry framing met by a reader without a registry: a misconfiguration.

    Readers stop on it instead of dead-lettering good records or paying for them again.
    """
