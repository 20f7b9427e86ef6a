"""A run's configuration (what shaped its answers) as canonical JSON, and its fingerprint.

Design rule 10: every record carries it, and resume reuses only records made under the same
configuration. The shape of a run (epochs, `--limit`, `--range`, chunks) is not part of it:
re-running a run id with fewer epochs or a smaller limit is the same experiment. So the
dataset's hash is over the benchmark's whole dataset, before any limit.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from resultlog.producer.datasets import Benchmark, Sample, _Limited
from resultlog.producer.errors import ProducerError
from resultlog.schemas import DecodeError, FoldView, RunKey, SampleResult

__all__ = [
    "ConfigChangedError",
    "RunConfig",
    "check_config",
    "config_fields",
    "dataset_sha256",
    "differences",
    "run_config",
]

log = logging.getLogger(__name__)

CONFIG_FORMAT = 1
_PLACEHOLDER = Sample(id="{id}", input="{input}", target="{target}", index=0)
_SHOWN_CHARS = 40


class ConfigChangedError(ProducerError):
    """The run key's durable records were made under another configuration."""


@dataclass(frozen=True)
class RunConfig:
    """What shaped a run's answers: the model and endpoint, generation parameters, the
    benchmark (name, version, dataset, prompt template, scorer)."""

    model: str
    base_url: str | None  # None: the embedded offline model
    temperature: float | None
    max_tokens: int | None
    benchmark: str
    benchmark_version: str | None
    dataset_sha256: str
    prompt_sha256: str
    scorer: str

    def as_dict(self) -> dict[str, Any]:
        """The configuration as the JSON object records carry."""
        return {
            "format": CONFIG_FORMAT,
            "model": self.model,
            "base_url": self.base_url,
            "generation": {"temperature": self.temperature, "max_tokens": self.max_tokens},
            "benchmark": {"name": self.benchmark, "version": self.benchmark_version},
            "dataset_sha256": self.dataset_sha256,
            "prompt_sha256": self.prompt_sha256,
            "scorer": self.scorer,
        }

    @cached_property
    def canonical(self) -> str:
        """Canonical JSON: sorted keys, no spaces, UTF-8 as is."""
        return _canonical(self.as_dict())

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of the canonical JSON, in hex."""
        return hashlib.sha256(self.canonical.encode("utf-8")).hexdigest()


def run_config(
    benchmark: Benchmark,
    model: str,
    *,
    base_url: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> RunConfig:
    """The configuration of a run of `benchmark` as `model` (a limit does not change it)."""
    whole = benchmark
    while isinstance(whole, _Limited):
        whole = whole.inner
    version = getattr(whole, "version", None)
    return RunConfig(
        model=model,
        base_url=base_url.rstrip("/") if base_url else None,
        temperature=None if temperature is None else float(temperature),
        max_tokens=max_tokens,
        benchmark=whole.name,
        benchmark_version=None if version is None else str(version),
        dataset_sha256=dataset_sha256(whole.samples()),
        prompt_sha256=_sha256(_canonical(_template(whole))),
        scorer=_scorer_name(whole),
    )


def config_fields(config: RunConfig | None) -> dict[str, Any]:
    """The record fields `config` and `config_fingerprint` (both None without a config)."""
    if config is None:
        return {"config": None, "config_fingerprint": None}
    return {"config": config.canonical, "config_fingerprint": config.fingerprint}


def check_config(
    run_key: RunKey,
    config: RunConfig,
    records: Iterable[SampleResult | FoldView],
    *,
    accept: bool = False,
    whole: Callable[[FoldView], SampleResult] | None = None,
) -> int:
    """Refuse records of another configuration (unless `accept`); warn once about records
    without one (schema v1) and return how many there are.

    Fold views are compared by fingerprint; `whole` decodes the one record whose
    configuration the error names (without it, a view's differences go unnamed).
    """
    others: Counter[str] = Counter()
    example: dict[str, SampleResult | FoldView] = {}
    unfingerprinted = 0
    for record in records:
        fingerprint = record.config_fingerprint
        if fingerprint is None:
            unfingerprinted += 1
        elif fingerprint != config.fingerprint:
            others[fingerprint] += 1
            example.setdefault(fingerprint, record)
    if others and not accept:
        common, count = others.most_common(1)[0]
        differing = differences(config.as_dict(), _config_text(example[common], whole))
        raise ConfigChangedError(
            f"{run_key}: {count} durable record(s) were made under another configuration "
            f"({differing}); use a new run id, or `resultlog run --accept-config-change` "
            f"to reuse them as they are"
        )
    if others:
        log.warning(
            "%s: reusing %d durable record(s) of another configuration, as asked",
            run_key,
            others.total(),
        )
    if unfingerprinted:
        log.warning(
            "%s: %d durable record(s) carry no configuration (schema v1): reused as they are, "
            "unchecked",
            run_key,
            unfingerprinted,
        )
    return unfingerprinted


def _config_text(
    record: SampleResult | FoldView, whole: Callable[[FoldView], SampleResult] | None
) -> str | None:
    """A record's configuration text, decoding a view's whole record (None if it cannot)."""
    if isinstance(record, SampleResult):
        return record.config
    if whole is None:
        return None
    try:
        return whole(record).config
    except DecodeError as exc:
        log.warning("%s: cannot read a durable record's configuration: %s", record.run_key, exc)
        return None


def dataset_sha256(samples: Sequence[Sample]) -> str:
    """sha256 of the samples (id, input, target, metadata) as canonical JSON lines, in order."""
    digest = hashlib.sha256()
    for sample in samples:
        fields = [sample.id, sample.input, sample.target, sample.metadata]
        line = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def differences(config: dict[str, Any], other_json: str | None) -> str:
    """`field: value there, value here` for each field of `config` and another configuration's
    JSON that differs, on one line."""
    try:
        other = json.loads(other_json or "null")
    except ValueError:
        other = None
    mine, theirs = _flat(config), _flat(other) if isinstance(other, dict) else {}
    names = sorted(
        name for name in mine.keys() | theirs.keys() if mine.get(name) != theirs.get(name)
    )
    parts = [
        f"{name}: {_shown(theirs.get(name))} there, {_shown(mine.get(name))} here" for name in names
    ]
    return "; ".join(parts) or "an unreadable configuration"


def _flat(value: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested fields as dotted names: {"generation.temperature": 0.7, ...}."""
    flat: dict[str, Any] = {}
    for name, item in value.items():
        if isinstance(item, dict):
            flat.update(_flat(item, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = item
    return flat


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _template(benchmark: Benchmark) -> Any:
    """The prompt of a placeholder sample: the template, whatever the dataset holds."""
    try:
        return benchmark.messages(_PLACEHOLDER)
    except Exception:  # a benchmark whose prompt needs a real sample: its first one's
        samples = benchmark.samples()
        return benchmark.messages(samples[0]) if samples else None


def _scorer_name(benchmark: Benchmark) -> str:
    """The scorer's name: a benchmark's `scorer` function, else its class's `score`."""
    scorer = getattr(benchmark, "scorer", None)
    name = getattr(scorer, "__qualname__", None)
    if isinstance(name, str):
        return name
    return f"{type(benchmark).__qualname__}.score"


def _canonical(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
