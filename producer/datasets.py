"""Benchmarks: samples, prompts and scoring; the built-in `arith`, JSONL files, limits."""

from __future__ import annotations

import codecs
import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from resultlog.producer._arith import evaluate, generate_expressions
from resultlog.producer._scorers import (
    Scored,
    Scorer,
    exact_match,
    extract_final_number,
    normalize_answer,
    numeric_match,
    parse_number,
)
from resultlog.producer.errors import BenchmarkError

__all__ = [
    "ARITH_SEED",
    "ARITH_SIZE",
    "BUILTIN_BENCHMARKS",
    "Benchmark",
    "Sample",
    "Scored",
    "Scorer",
    "StaticBenchmark",
    "arith",
    "exact_match",
    "extract_final_number",
    "limit_samples",
    "load_jsonl",
    "normalize_answer",
    "numeric_match",
    "resolve_benchmark",
]

ARITH_SIZE = 1000
ARITH_SEED = 20240917
_ARITH_SYSTEM = "Answer the arithmetic question. End your reply with the final integer."
_KNOWN_KEYS = frozenset({"id", "input", "target", "metadata"})


@dataclass(frozen=True)
class Sample:
    """One dataset item; `index` is its absolute position in the dataset."""

    id: str
    input: str
    target: str | None
    metadata: dict[str, Any] | None = None
    index: int = 0


@runtime_checkable
class Benchmark(Protocol):
    """What the runner needs from a benchmark."""

    @property
    def name(self) -> str:
        """The benchmark id used in run keys."""
        ...

    def samples(self) -> Sequence[Sample]:
        """Return every sample, in dataset order."""
        ...

    def messages(self, sample: Sample) -> list[dict[str, Any]]:
        """Return the chat messages that pose the sample to a model."""
        ...

    def score(self, sample: Sample, completion_text: str) -> Scored:
        """Score a completion for the sample."""
        ...


@dataclass(frozen=True)
class StaticBenchmark:
    """A benchmark over a fixed, in-memory list of samples."""

    name: str
    items: tuple[Sample, ...]
    scorer: Scorer
    system_prompt: str | None = None

    def samples(self) -> Sequence[Sample]:
        """Return every sample, in dataset order."""
        return self.items

    def messages(self, sample: Sample) -> list[dict[str, Any]]:
        """Return an optional system message followed by the sample's input as a user turn."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return [*system, {"role": "user", "content": sample.input}]

    def score(self, sample: Sample, completion_text: str) -> Scored:
        """Score a completion with this benchmark's scorer."""
        return self.scorer(sample.target, completion_text)


@functools.cache
def arith() -> StaticBenchmark:
    """The built-in arithmetic benchmark: ARITH_SIZE seeded questions such as `What is 17 + 25?`."""
    items = tuple(
        Sample(
            id=f"arith-{i:04d}",
            input=f"What is {expr}?",
            target=str(evaluate(expr)),
            metadata={"expression": expr},
            index=i,
        )
        for i, expr in enumerate(generate_expressions(ARITH_SIZE, ARITH_SEED))
    )
    return StaticBenchmark("arith", items, numeric_match, _ARITH_SYSTEM)


@dataclass(frozen=True)
class _Limited:
    """The first `limit` samples of a benchmark; its dataset is those samples."""

    inner: Benchmark
    limit: int

    @property
    def name(self) -> str:
        """The inner benchmark's name: a limited run is still a run of that benchmark."""
        return self.inner.name

    def samples(self) -> Sequence[Sample]:
        """The first `limit` samples."""
        return self.inner.samples()[: self.limit]

    def messages(self, sample: Sample) -> list[dict[str, Any]]:
        """The inner benchmark's prompt."""
        return self.inner.messages(sample)

    def score(self, sample: Sample, completion_text: str) -> Scored:
        """The inner benchmark's scorer."""
        return self.inner.score(sample, completion_text)


def limit_samples(benchmark: Benchmark, limit: int) -> Benchmark:
    """The benchmark restricted to its first `limit` samples (`resultlog run --limit N`)."""
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    return _Limited(benchmark, limit)


BUILTIN_BENCHMARKS: dict[str, Callable[[], Benchmark]] = {"arith": arith}


def resolve_benchmark(name_or_path: str | Path) -> Benchmark:
    """Return a built-in benchmark by name, or load a `.jsonl` file."""
    text = str(name_or_path)
    if text in BUILTIN_BENCHMARKS:
        return BUILTIN_BENCHMARKS[text]()
    path = Path(text)
    if path.suffix == ".jsonl" or path.is_file():
        return load_jsonl(path)
    builtins = ", ".join(sorted(BUILTIN_BENCHMARKS))
    raise BenchmarkError(
        f"unknown benchmark {text!r}: use a built-in ({builtins}) or a path to a .jsonl file"
    )


def load_jsonl(path: str | Path, *, scorer: Scorer | None = None) -> StaticBenchmark:
    """Load samples from a JSONL file (objects with id, input, optional target and metadata).

    The benchmark is named after the file stem. Without an explicit scorer, numeric
    matching is used when every target is a number, normalized exact match otherwise.
    Keys other than id/input/target/metadata are kept in the sample's metadata.
    """
    path = Path(path)
    items = tuple(_read_samples(path))
    if not items:
        raise BenchmarkError(f"{path}: no samples (the file is empty)")
    chosen = scorer or (numeric_match if _all_numeric(items) else exact_match)
    return StaticBenchmark(path.stem, items, chosen)


def _read_samples(path: Path) -> list[Sample]:
    """Parse every non-blank line of the file into a Sample, rejecting duplicate ids."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BenchmarkError(f"{path}: cannot read benchmark file: {exc.strerror or exc}") from exc
    samples: list[Sample] = []
    first_line: dict[str, int] = {}
    raw = raw.removeprefix(codecs.BOM_UTF8)  # editors on Windows start UTF-8 files with one
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            sample = _parse_line(line, len(samples))
        except ValueError as exc:
            raise BenchmarkError(f"{path}:{lineno}: {exc}") from exc
        if sample.id in first_line:
            where = f"line {first_line[sample.id]}"
            raise BenchmarkError(f"{path}:{lineno}: duplicate id {sample.id!r} (first on {where})")
        first_line[sample.id] = lineno
        samples.append(sample)
    return samples


def _parse_line(line: bytes, index: int) -> Sample:
    """Parse one JSONL line; ValueError describes what is wrong with it."""
    try:
        obj = json.loads(line.decode("utf-8"), parse_constant=_not_json)
        # A lone surrogate escape (\ud800) parses, but no UTF-8 text (nor Kafka) can hold it.
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 ({exc.reason})") from exc
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start : exc.end].encode("unicode_escape").decode("ascii")
        raise ValueError(f"holds a lone surrogate escape ({bad}), which is not text") from exc
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    return Sample(
        id=_text_field(obj, "id", required=True) or "",
        input=_text_field(obj, "input", required=True) or "",
        target=_text_field(obj, "target", required=False),
        metadata=_metadata(obj),
        index=index,
    )


def _not_json(constant: str) -> Any:
    """Python's json reads NaN and Infinity; JSON has no such numbers, so neither do we."""
    raise ValueError(f"{constant} is not a JSON number (use null or a string)")


def _text_field(obj: dict[str, Any], key: str, *, required: bool) -> str | None:
    """Read a string (or integer/number, rendered as text) field."""
    value = obj.get(key)
    if value is None:
        if required:
            raise ValueError(f"missing required field {key!r}")
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"field {key!r} must be a string, got {type(value).__name__}")
    text = value if isinstance(value, str) else json.dumps(value)
    if required and not text.strip():
        raise ValueError(f"field {key!r} must not be empty")
    return text


def _metadata(obj: dict[str, Any]) -> dict[str, Any] | None:
    """Merge an explicit `metadata` object with any unknown keys (the object wins)."""
    explicit = obj.get("metadata")
    if explicit is not None and not isinstance(explicit, dict):
        raise ValueError(f"field 'metadata' must be an object, got {type(explicit).__name__}")
    extra = {k: v for k, v in obj.items() if k not in _KNOWN_KEYS}
    merged = {**extra, **(explicit or {})}
    return merged or None


def _all_numeric(items: Sequence[Sample]) -> bool:
    """True when every sample has a target that is a plain number."""
    return all(s.target is not None and parse_number(s.target) is not None for s in items)
