"""Exception hierarchy: one root for every error resultlog raises on purpose."""

from __future__ import annotations


class ResultLogError(Exception):
    """Root of every error resultlog raises on purpose."""


class SchemaError(ResultLogError):
    """A record or schema violates the contract."""


class DecodeError(SchemaError):
    """Bytes read from Kafka could not be decoded into a record."""

    def __init__(
        self,
        reason: str,
        raw: bytes | None,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = reason
        self.raw = raw
        self.topic = topic
        self.partition = partition
        self.offset = offset
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = ""
        if self.topic is not None:
            where = f" at {self.topic}[{self.partition}]@{self.offset}"
        size = "no value" if self.raw is None else f"{len(self.raw)} bytes"
        return f"cannot decode record{where} ({size}): {self.reason}"

    def at(self, topic: str, partition: int, offset: int) -> DecodeError:
        """Return a copy of this error that names where the bytes came from."""
        return DecodeError(self.reason, self.raw, topic=topic, partition=partition, offset=offset)
