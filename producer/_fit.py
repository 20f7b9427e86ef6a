"""Make a record fit the results topic: as it is when it fits, else in a reduced form.

A record fits when its raw size (key, value and record overhead) is within the producer's
`message.max.bytes`, which librdkafka checks before compressing, and its compressed size is
within the topic's `max.message.bytes`, which the broker checks on the compressed batch.
The compressed size is estimated with zlib at its fastest level, which compresses text less
than the zstd the producer uses, with a margin besides.

A record that does not fit is reduced: its largest contents are cut, one at a time, until its
raw size fits the topic's limit, whatever the compression. Each cut field is named in
`truncated` (JSON text: path -> original length in bytes, sha256 of the original, bytes
kept). A cut text keeps its first bytes; a cut JSON-text field becomes a JSON string of the
first bytes of its original text; a cut harness payload is dropped.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from resultlog.producer._records import INPUT_REF
from resultlog.producer.errors import PersistenceError
from resultlog.schemas import TRUSTED_JSON, SampleResult

__all__ = ["SizeLimits", "reduce_to"]

Encode = Callable[[SampleResult], bytes]
_Path = tuple[str | int, ...]

# Per-record bytes Kafka adds (record header, varints, batch header), rounded up.
_RECORD_OVERHEAD = 256
_JSON_FIELDS = frozenset(
    {"metadata", "response_items", "trajectory", "content_parts", "reasoning_details"}
    | {"citations", "arguments"}
)
_MESSAGE_FIELDS = ("content", "content_parts", "reasoning", "reasoning_details", "citations")


@dataclass(frozen=True)
class SizeLimits:
    """The producer's limit on a raw message and the topic's on a compressed batch."""

    producer_bytes: int
    topic_bytes: int

    @property
    def topic_budget(self) -> int:
        """What one record may take of the topic's limit, keeping a margin for estimates."""
        return self.topic_bytes - self.topic_bytes // 64 - _RECORD_OVERHEAD

    def fits(self, key: bytes, value: bytes) -> bool:
        """True when the broker and the producer accept the message as it is."""
        raw = len(key) + len(value)
        if raw + _RECORD_OVERHEAD > self.producer_bytes:
            return False
        if raw <= self.topic_budget:
            return True
        return len(key) + len(zlib.compress(value, 1)) <= self.topic_budget

    def reduced_size(self, key: bytes) -> int:
        """The raw value size a reduced record must not exceed."""
        return min(self.topic_budget, self.producer_bytes - _RECORD_OVERHEAD) - len(key)


def reduce_to(record: SampleResult, encode: Encode, size: int) -> tuple[SampleResult, bytes]:
    """The record with its largest contents cut until its encoding takes at most `size` bytes."""
    data = record.model_dump()
    cuts: dict[str, dict[str, Any]] = json.loads(record.truncated or "{}")
    exhausted: set[_Path] = set()
    value = encode(record)
    while len(value) > size:
        path = _largest(data, exhausted)
        if path is None:
            where = f"sample {record.sample_id} epoch {record.epoch}"
            raise PersistenceError(
                f"record for {where} does not fit in {size} bytes even with every content cut",
                retriable=False,
            )
        keep = max(0, _size(_get(data, path)) - (len(value) - size) - 64)
        if not _cut(data, path, keep, cuts):
            exhausted.add(path)
            continue
        data["truncated"] = json.dumps(cuts, sort_keys=True)
        record = SampleResult.model_validate(data, context=TRUSTED_JSON)
        value = encode(record)
    return record, value


def _contents(data: dict[str, Any]) -> list[_Path]:
    """Where the free-form contents of a record are (never ids, keys, numbers or config)."""
    paths: list[_Path] = [("input",), ("target",), ("metadata",), ("response_items",)]
    paths += [("score", name) for name in ("answer", "explanation", "trajectory")]
    paths.append(("harness_payload",))
    if data.get("error") is not None:
        paths.append(("error", "message"))
    for i, message in enumerate(data["messages"]):
        paths += [("messages", i, name) for name in _MESSAGE_FIELDS]
        calls = range(len(message["tool_calls"]))
        paths += [("messages", i, "tool_calls", j, "arguments") for j in calls]
    return paths


def _largest(data: dict[str, Any], exhausted: set[_Path]) -> _Path | None:
    """The content with the most bytes that can still be cut (None: nothing left)."""
    sized = [
        (_size(value), path)
        for path in _contents(data)
        if path not in exhausted and (value := _get(data, path)) != INPUT_REF
    ]
    length, path = max(sized, key=lambda item: item[0])
    return path if length > 0 else None


def _cut(data: dict[str, Any], path: _Path, keep: int, cuts: dict[str, dict[str, Any]]) -> bool:
    """Cut the content at `path` to about `keep` bytes, say so in `cuts`; False if it cannot."""
    name = ".".join(map(str, path))
    current = _get(data, path)
    json_text = path[-1] in _JSON_FIELDS
    if name not in cuts:  # a second cut keeps the first one's account of the original
        original = current if isinstance(current, bytes) else current.encode()
        cuts[name] = {"length": len(original), "sha256": hashlib.sha256(original).hexdigest()}
        text = current
    else:
        text = json.loads(current) if json_text and isinstance(current, str) else current
    if isinstance(current, bytes):
        _set(data, path, None)
        cuts[name]["kept"] = 0
        return True
    kept = _prefix(text, keep)
    stored = kept
    if json_text:
        while kept and len(json.dumps(kept, ensure_ascii=False).encode()) > keep:
            kept = _prefix(kept, len(kept.encode()) // 2)
        stored = json.dumps(kept, ensure_ascii=False)
    if _size(stored) >= _size(current):
        return False
    _set(data, path, stored)
    cuts[name]["kept"] = len(kept.encode())
    return True


def _prefix(text: str, size: int) -> str:
    """The longest prefix of `text` of at most `size` UTF-8 bytes."""
    return text.encode()[:size].decode("utf-8", "ignore")


def _size(value: Any) -> int:
    if isinstance(value, bytes):
        return len(value)
    return len(value.encode()) if isinstance(value, str) else 0


def _get(data: Any, path: _Path) -> Any:
    for step in path:
        data = data[step]
    return data


def _set(data: Any, path: _Path, value: Any) -> None:
    _get(data, path[:-1])[path[-1]] = value
