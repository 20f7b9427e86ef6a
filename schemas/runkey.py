"""The run key: (run_id, benchmark_id, model), the identity of one evaluation run."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from resultlog.schemas.errors import SchemaError

# C0 and C1 controls (NUL, newlines, escapes), the bidi marks, embeddings, overrides and
# isolates (a name that reorders itself: "rtl-\u202egnp.exe" shows as "rtl-exe.png"), and
# the Unicode line and paragraph separators.
_REFUSED = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
# A path segment browsers and URL parsers resolve away: /page/run/../b/m is /page/b/m.
_DOT_SEGMENTS = frozenset({".", ".."})


class InvalidRunKeyError(SchemaError, ValueError):
    """A run key part is empty, not a string, not UTF-8, a dot segment or has a control char."""


@dataclass(frozen=True, slots=True, order=True)
class RunKey:
    """Identity of one run; hashable, ordered, every part a non-empty string."""

    run_id: str
    benchmark_id: str
    model: str

    def __str__(self) -> str:
        return f"{self.run_id} / {self.benchmark_id} / {self.model}"

    def __post_init__(self) -> None:
        for name in ("run_id", "benchmark_id", "model"):
            _check_part(name, getattr(self, name))


class _RunKeyParts(Protocol):
    @property
    def run_id(self) -> str: ...
    @property
    def benchmark_id(self) -> str: ...
    @property
    def model(self) -> str: ...


class RunKeyed:
    """The run key of a model whose `run_id`, `benchmark_id` and `model` fields make one."""

    __slots__ = ()

    @property
    def run_key(self: _RunKeyParts) -> RunKey:
        """The run it belongs to."""
        return RunKey(self.run_id, self.benchmark_id, self.model)


def _check_part(name: str, value: object) -> None:
    """Reject a run key part that cannot round-trip through a Kafka key."""
    if not isinstance(value, str):
        raise InvalidRunKeyError(f"RunKey.{name} must be a str, got {type(value).__name__}")
    if not value:
        raise InvalidRunKeyError(f"RunKey.{name} must be a non-empty string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidRunKeyError(f"RunKey.{name} is not encodable as UTF-8: {exc}") from exc
    if value in _DOT_SEGMENTS:
        raise InvalidRunKeyError(f"RunKey.{name} must not be {value!r}: links to it would not work")
    found = _REFUSED.search(value)
    if found is not None:
        char = found.group()
        label = unicodedata.name(char, "CONTROL")
        raise InvalidRunKeyError(
            f"RunKey.{name} contains a control character, U+{ord(char):04X} ({label}), at "
            f"position {found.start()} (control and bidi characters are refused)"
        )


@lru_cache(maxsize=4096)  # readers meet the same few run keys on every record
def is_run_key_part(value: str) -> bool:
    """Whether `value` may be a part of a run key (what `_check_part` accepts), quietly."""
    try:
        _check_part("part", value)
    except InvalidRunKeyError:
        return False
    return True


def check_run_key_part(value: str, name: str) -> str:
    """`value` if it may be the `name` part of a run key; InvalidRunKeyError otherwise."""
    _check_part(name, value)
    return value
