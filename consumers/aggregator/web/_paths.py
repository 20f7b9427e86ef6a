"""What the API reads from a request's path and query: run keys, percent-encoded as in keys.

Paths accept what ordinary clients send: each segment is percent-decoded whatever the case of
its escapes, and the characters `encodeURIComponent` and RFC 3986 leave unescaped in a path
segment are taken as themselves (`(`, `)`, `!`, `*`, `'`, `:`, `@`, `+`...). The decoded
parts are the run key; keys on the wire stay canonical. A part is at most 256 characters, as
on the command line. A run named in a query (`/compare?a=RUN&b=RUN`) follows the same rules:
RUN is `run_id/benchmark/model`, each segment percent-encoded, the slashes as they are.
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from resultlog.consumers.errors import ConsumerError
from resultlog.schemas import InvalidRunKeyError, RunKey

__all__ = [
    "MAX_PART",
    "BadRequestError",
    "compare_keys",
    "describe",
    "run_key_from_path",
    "run_key_of",
    "run_route",
]

MAX_PART = 256  # characters of a run key part, as the command line allows
RUNS_PREFIX = b"/runs/"
_NAMES = ("run_id", "benchmark", "model")
# A path segment: RFC 3986 pchar (unreserved, sub-delims, ':' '@') or a %XX escape of any case.
_SEGMENT = re.compile(rb"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})+")
_MAX_SEGMENT_BYTES = MAX_PART * 12  # each character a 4-byte UTF-8 sequence, each byte %XX
_SAMPLES = b"samples"
_COMPARE_USAGE = (
    "expected /compare?a=RUN&b=RUN, RUN being run_id/benchmark/model with each segment "
    "percent-encoded (e.g. r1/arith/openai%2Fgpt-4o)"
)


class BadRequestError(ConsumerError, ValueError):
    """A request the API refuses with 400."""


def run_key_from_path(raw_path: bytes) -> RunKey:
    """The run key of `/runs/{run_id}/{benchmark}/{model}`, each segment percent-encoded."""
    run_key, view = run_route(raw_path)
    if view is not None:
        raise _bad_path("found 4 segments, expected 3")
    return run_key


def run_route(raw_path: bytes, prefix: bytes = RUNS_PREFIX) -> tuple[RunKey, str | None]:
    """The run key of `{prefix}{run_id}/{benchmark}/{model}[/samples]` and the view asked for
    (None: the summary)."""
    path = raw_path.split(b"?", 1)[0]
    if not path.startswith(prefix):
        raise BadRequestError(f"the path must start with {prefix.decode()} (unencoded)")
    segments = path[len(prefix) :].split(b"/")
    if len(segments) == len(_NAMES) + 1 and segments[-1] == _SAMPLES:
        return run_key_of(segments[:-1], prefix), "samples"
    return run_key_of(segments, prefix), None


def run_key_of(segments: list[bytes], prefix: bytes = RUNS_PREFIX) -> RunKey:
    """The run key of three percent-encoded segments (BadRequestError otherwise, naming the
    route that was asked, `{prefix}...`)."""
    if len(segments) != len(_NAMES):
        raise _bad_path(f"found {len(segments)} segments, expected 3", prefix)
    parts = [_part(name, segment, prefix) for name, segment in zip(_NAMES, segments, strict=True)]
    try:
        return RunKey(*parts)
    except InvalidRunKeyError as exc:
        raise _bad_path(str(exc), prefix) from exc


def compare_keys(query: bytes) -> tuple[RunKey, RunKey]:
    """The run keys `a` and `b` of a raw query string: two runs of one benchmark."""
    given: dict[bytes, bytes] = {}
    for pair in query.split(b"&"):
        name, _, value = pair.partition(b"=")
        if name in (b"a", b"b"):
            if name in given:
                raise BadRequestError(f"{_COMPARE_USAGE}: {name.decode()} is given twice")
            given[name] = value
    keys = []
    for name in (b"a", b"b"):
        if not given.get(name):
            raise BadRequestError(f"{_COMPARE_USAGE}: {name.decode()} is missing")
        try:
            keys.append(run_key_of(given[name].split(b"/")))
        except BadRequestError as exc:
            raise BadRequestError(f"{_COMPARE_USAGE}: {name.decode()}: {exc}") from None
    a, b = keys
    if a.benchmark_id != b.benchmark_id:
        raise BadRequestError(
            f"a and b must be runs of one benchmark, got {a.benchmark_id!r} and {b.benchmark_id!r}"
        )
    return a, b


def describe(run_key: RunKey) -> str:
    """A run key as people read it: run_id/benchmark/model, unencoded."""
    return f"{run_key.run_id}/{run_key.benchmark_id}/{run_key.model}"


def _part(name: str, segment: bytes, prefix: bytes) -> str:
    """One decoded path segment: bounded, well-escaped, UTF-8."""
    if len(segment) > _MAX_SEGMENT_BYTES:
        raise _bad_path(f"{name} is longer than {MAX_PART} characters", prefix)
    if not _SEGMENT.fullmatch(segment):
        raise _bad_path(f"{name} {segment[:40]!r} is empty or has a bad percent-escape", prefix)
    try:
        value = unquote_to_bytes(segment).decode("utf-8")
    except UnicodeDecodeError:
        raise _bad_path(f"{name} {segment[:40]!r} is not percent-encoded UTF-8", prefix) from None
    if len(value) > MAX_PART:
        raise _bad_path(f"{name} is longer than {MAX_PART} characters", prefix)
    return value


def _bad_path(reason: str, prefix: bytes = RUNS_PREFIX) -> BadRequestError:
    return BadRequestError(
        f"expected {prefix.decode()}{{run_id}}/{{benchmark}}/{{model}}, each segment "
        f"percent-encoded (e.g. openai%2Fgpt-4o): {reason}"
    )
